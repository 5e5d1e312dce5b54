"""Generates text from a trained workdir: `python -m vit_jax.generate --workdir=W --prompt=...`.

GPT workdirs continue each prompt (greedy with --temperature=0, else sampling with top-k/top-p);
seq2seq workdirs decode each prompt as an input sequence (greedy, or beam search). The model,
its parameters and the tokenizer all come from the workdir, so they always match.
"""

import json
import sys

from absl import app
from absl import flags
from absl import logging

from vit_jax import startup

FLAGS = flags.FLAGS
flags.DEFINE_string("workdir", None, "A training workdir of vit_jax.main.")
flags.DEFINE_multi_string("prompt", [], "Prompt text; repeat the flag for a batch of prompts.")
flags.DEFINE_integer("max_new_tokens", 100, "Tokens to generate per prompt.")
flags.DEFINE_float("temperature", 0.8, "0 means greedy decoding.")
flags.DEFINE_integer("top_k", 0, "Sample only among the k most likely tokens (0: all).")
flags.DEFINE_float("top_p", 1.0, "Sample only from the smallest set with this probability mass.")
flags.DEFINE_integer("seed", 0, "Sampling seed.")
flags.DEFINE_integer("beam_size", 1, "Beam width for seq2seq (1: greedy).")
flags.DEFINE_bool("cache", True, "Use the KV cache (off: recompute everything per token).")
flags.DEFINE_bool(
    "print_ids",
    False,
    "Also print the new token ids (to compare with another "
    "implementation, e.g. Hugging Face's generate on an imported model).",
)


def load_workdir(workdir: str):
  """(model config, params, tokenizer, task name) of the workdir's latest checkpoint."""
  # pylint: disable=g-import-not-at-top
  from vit_jax import checkpoint
  from vit_jax import errors
  from vit_jax import interop
  from vit_jax import storage
  from vit_jax import workdir as workdir_lib
  from vit_jax.data import tokenizers
  from vit_jax.data.tokenizers import base
  from vit_jax.interop import orbax_format

  step_dirs = checkpoint.step_dirs(workdir)
  if not step_dirs:
    raise errors.MissingFileError(f"No checkpoints in {workdir!r}: train first with vit_jax.main.")
  step_dir, (params, record) = checkpoint.first_intact(step_dirs, orbax_format.read_step)
  step = storage.name(step_dir)
  task = json.loads(storage.read_text(workdir_lib.config_path(workdir)))["task"]
  tokenizer = tokenizers.load_tokenizer(workdir_lib.tokenizer_dir(workdir))
  expected = record.get("task", {}).get("tokenizer")
  if expected is not None:
    base.check_fingerprint(tokenizer, expected, context=f"checkpoint {step} in {workdir}")
  return record["model"], interop.unflatten(params), tokenizer, task


def encode_prompt(tokenizer, text: str) -> list[int]:
  """Token ids of `text`; characters a char tokenizer never saw are an error, not silent UNKs."""
  from vit_jax import errors  # pylint: disable=g-import-not-at-top

  ids = tokenizer.encode(text)
  if tokenizer.kind == "char" and tokenizer.unk_id in ids:
    unknown = sorted({c for c in text if tokenizer.encode(c) == [tokenizer.unk_id]})
    raise errors.ConfigError(
        f"--prompt has characters the workdir's tokenizer never saw: "
        f"{''.join(unknown)!r}; leave them out of the prompt."
    )
  return ids


def parse_flags(argv):
  """absl parsing, but an unknown or malformed flag is one clear line and exit code 2."""
  try:
    return FLAGS(argv)
  except flags.Error as e:
    print(f"error: {e}. Run with --helpfull for the flags.", file=sys.stderr)
    sys.exit(2)


def main(argv):
  del argv
  startup.quiet_startup()  # before TF, JAX and orbax load
  logging.set_verbosity(logging.WARNING)
  if not FLAGS.workdir or not FLAGS.prompt:
    print("error: --workdir and at least one --prompt are required.", file=sys.stderr)
    sys.exit(2)
  # pylint: disable=g-import-not-at-top
  import numpy as np

  from vit_jax import errors
  from vit_jax import tasks
  from vit_jax.config import checks
  from vit_jax.models import sampling

  try:
    checks.validate_generation(
        max_new_tokens=FLAGS.max_new_tokens,
        temperature=FLAGS.temperature,
        top_k=FLAGS.top_k,
        top_p=FLAGS.top_p,
        beam_size=FLAGS.beam_size,
    )
    model_config, params, tokenizer, task = load_workdir(FLAGS.workdir)
    prompts = [encode_prompt(tokenizer, p) for p in FLAGS.prompt]
    if task == "causal_lm":
      outputs = sampling.generate(
          model_config,
          params,
          prompts,
          max_new_tokens=FLAGS.max_new_tokens,
          temperature=FLAGS.temperature,
          top_k=FLAGS.top_k,
          top_p=FLAGS.top_p,
          eos_id=tokenizer.eos_id,
          seed=FLAGS.seed,
          use_cache=FLAGS.cache,
      )
      for prompt, new in zip(FLAGS.prompt, outputs):
        print(prompt + tokenizer.decode(new))
        if FLAGS.print_ids:
          print(f"ids: {' '.join(str(int(t)) for t in new)}")
        print("-" * 40)
    elif task == "seq2seq":
      inputs_len = max(len(p) for p in prompts) + 1
      inputs = np.zeros((len(prompts), inputs_len), np.int32)
      mask = np.zeros_like(inputs)
      for i, p in enumerate(prompts):
        ids = p + ([tokenizer.eos_id] if tokenizer.eos_id is not None else [])
        inputs[i, : len(ids)], mask[i, : len(ids)] = ids, 1
      start = tokenizer.bos_id if tokenizer.bos_id is not None else tokenizer.pad_id
      outputs = sampling.seq2seq_decode(
          model_config,
          params,
          inputs,
          mask,
          max_new_tokens=FLAGS.max_new_tokens,
          start_id=start,
          eos_id=tokenizer.eos_id,
          beam_size=FLAGS.beam_size,
      )
      for prompt, out in zip(FLAGS.prompt, outputs):
        print(f"{prompt} -> {tokenizer.decode(out)}")
    else:
      raise errors.ConfigError(
          f"The workdir trained a {task!r} model; generation needs one of "
          f"{', '.join(tasks.GENERATING)}."
      )
  except errors.USER_ERRORS as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(errors.exit_code(e))


if __name__ == "__main__":
  app.run(main, flags_parser=parse_flags)
