"""Predicts with a trained or imported model: `python -m vit_jax.predict --checkpoint=PATH ...`.

  --image=FILE_OR_FOLDER (repeatable)   a ViT's top-k classes with names: the workdir's dataset
                                        names, a Hugging Face config's id2label, ImageNet's for
                                        1000 classes ("tench (n01440764)"), or --labels=FILE;
                                        probabilities by sigmoid for a workdir trained with
                                        loss=sigmoid_xent, else by softmax
  --text='The [MASK] sat.'              a masked-LM workdir's top-k tokens for each [MASK]
                                        (a causal LM continues text with vit_jax.generate)

Images get the model's eval preprocessing (central crop at its training resolution). Results
print one line per image or mask; --output=FILE.json keeps them all. Bad input: exit code 2.
"""

import json

from absl import app
from absl import flags
from absl import logging

from vit_jax import errors
from vit_jax import startup
from vit_jax import storage

FLAGS = flags.FLAGS
flags.DEFINE_string("checkpoint", None, "Our workdir, an .npz, or a Hugging Face model directory.")
flags.DEFINE_multi_string("image", [], "Image file or folder; repeat for several.")
flags.DEFINE_string("text", None, "Text with [MASK] tokens, for a masked-LM model.")
flags.DEFINE_integer("top_k", 5, "Predictions per image or mask.")
flags.DEFINE_integer("batch_size", 64, "Images per forward pass.")
flags.DEFINE_integer("image_size", None, "Input resolution (default: the model's).")
flags.DEFINE_string("labels", None, "Class names, one per line (default: see above).")
flags.DEFINE_string("output", None, "JSON file for all results (must not exist yet).")


def run():
  # pylint: disable=g-import-not-at-top
  from vit_jax.analysis import loading
  from vit_jax.analysis import predicting

  if not FLAGS.checkpoint or bool(FLAGS.image) == bool(FLAGS.text):
    raise errors.ConfigError("pass --checkpoint and either --image (files or folders) or --text.")
  if FLAGS.top_k < 1:
    raise errors.ConfigError(f"--top_k must be at least 1, got {FLAGS.top_k}.")
  if FLAGS.output and storage.exists(FLAGS.output):
    raise errors.ConfigError(
        f"--output {FLAGS.output} exists; choose a new file (nothing was written)."
    )
  loaded = loading.load(FLAGS.checkpoint)
  if FLAGS.image:
    results = predicting.classify_images(
        loaded,
        FLAGS.image,
        top_k=FLAGS.top_k,
        batch_size=FLAGS.batch_size,
        image_size=FLAGS.image_size,
        labels_file=FLAGS.labels,
    )
    lines = [predicting.describe_image(r) for r in results]
  else:
    loading.require_text_model(loaded)
    results = predicting.fill_masks(loaded, FLAGS.text, top_k=FLAGS.top_k)
    lines = predicting.describe_masks(results)
  return results, lines


def main(argv):
  del argv
  startup.quiet_startup()  # before TF, JAX and orbax load
  logging.set_verbosity(logging.WARNING)
  with errors.exit_on_user_error(where=FLAGS.output):
    results, lines = run()
    print("\n".join(lines))
    if FLAGS.output:
      with storage.open(FLAGS.output, "x", encoding="utf-8") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
  app.run(main)
