"""Looks inside a trained model:

  python -m vit_jax.visualize --checkpoint=PATH --image=... --output_dir=D


PATH is one of our workdirs, an original ViT / big_vision `.npz` or a Hugging Face directory.
For a ViT and image files (or folders) it writes, into a new directory D:
  attention_NN_<image>.png   the cls-token (or mean-query) attention of chosen layers and heads
  rollout.png                attention rollout through all layers, over each image
  attention_distance.png     mean attention distance of every head vs depth, over the images
  position_similarity.png    cosine similarity between the patches' position embeddings
  filters_pca.png            top principal components of the patch-embedding filters
For a BERT or GPT model and --text it writes text_attention.png (token-by-token weights).
summary.json holds the numbers behind every plot. Bad input is one line on stderr, exit code 2.
"""

from absl import app
from absl import flags
from absl import logging

from vit_jax import errors
from vit_jax import startup

FLAGS = flags.FLAGS
flags.DEFINE_string("checkpoint", None, "Our workdir, an .npz, or a Hugging Face model directory.")
flags.DEFINE_multi_string("image", [], "Image file or folder; repeat for several.")
flags.DEFINE_string("text", None, "Text to run through a BERT or GPT model.")
flags.DEFINE_string("output_dir", None, "New (or empty) directory for the PNGs and summary.json.")
flags.DEFINE_list("layers", None, "Layers for the attention maps (default: first and last).")
flags.DEFINE_list("heads", None, "Heads for the attention maps (default: all).")
flags.DEFINE_enum(
    "query",
    None,
    ["cls", "mean"],
    "Whose attention the image maps show: the cls token or the mean patch query "
    "(default: cls if the model has one).",
)
flags.DEFINE_integer(
    "image_size",
    None,
    "Input resolution (default: what the model was trained "
    "at; needed for imported sin-cos models that are not 224 px).",
)
flags.DEFINE_integer("components", 28, "Principal components of the filters to draw.")


def _indices(values, what):
  if values is None:
    return None
  try:
    return [int(v) for v in values]
  except ValueError:
    raise errors.ConfigError(
        f"--{what} must be comma-separated integers, got {','.join(values)!r}."
    ) from None


def run() -> list:
  # pylint: disable=g-import-not-at-top
  from vit_jax.analysis import loading
  from vit_jax.analysis import report

  if not FLAGS.checkpoint or not FLAGS.output_dir or bool(FLAGS.image) == bool(FLAGS.text):
    raise errors.ConfigError(
        "pass --checkpoint, --output_dir and either --image (one or more) or --text."
    )
  report.check_output_dir(FLAGS.output_dir)
  layers, heads = _indices(FLAGS.layers, "layers"), _indices(FLAGS.heads, "heads")
  loaded = loading.load(FLAGS.checkpoint)
  if FLAGS.image:
    summary, writers = report.visualize_images(
        loaded,
        FLAGS.image,
        layers=layers,
        heads=heads,
        query=FLAGS.query,
        image_size=FLAGS.image_size,
        components=FLAGS.components,
    )
  else:
    summary, writers = report.visualize_text(loaded, FLAGS.text, layers=layers, heads=heads)
  return report.write(FLAGS.output_dir, summary, writers)


def main(argv):
  del argv
  startup.quiet_startup()  # before TF, JAX and orbax load
  logging.set_verbosity(logging.WARNING)
  with errors.exit_on_user_error(where=FLAGS.output_dir):
    written = run()
  for path in written:
    print(path)


if __name__ == "__main__":
  app.run(main)
