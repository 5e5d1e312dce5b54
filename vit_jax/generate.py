"""Generates text from a trained workdir: `python -m vit_jax.generate --workdir=W --prompt=...`.

GPT workdirs continue each prompt (greedy with --temperature=0, else sampling with top-k/top-p).
Workdirs trained on pairs translate, greedily or by beam search with GNMT's length penalty
(--beam_size): a seq2seq model decodes each prompt as an input sequence, a GPT trained on pairs
(docs/pairs.md) continues `prompt [SEP]` to its EOS; both translate a file, one line in, one line
out, --batch_size lines at a time:

  python -m vit_jax.generate --workdir=W --input_file=sources.txt --output_file=outputs.txt

by the code the `decoding` evaluator decodes with (vit_jax/translate.py), each input cut as that
code says, and with its default --max_new_tokens when the flag is not given. The model, its
parameters and the tokenizer all come from the workdir, so they always match.
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
flags.DEFINE_integer(
    "max_new_tokens",
    100,
    "Tokens to generate per prompt (translating, unset: the decoding evaluator's default).",
)
flags.DEFINE_float("temperature", 0.8, "0 means greedy decoding.")
flags.DEFINE_integer("top_k", 0, "Sample only among the k most likely tokens (0: all).")
flags.DEFINE_float("top_p", 1.0, "Sample only from the smallest set with this probability mass.")
flags.DEFINE_integer("seed", 0, "Sampling seed.")
flags.DEFINE_integer("beam_size", 1, "Beam width for a model trained on pairs (1: greedy).")
flags.DEFINE_float("length_penalty", 0.6, "Beam search's GNMT length penalty alpha (0: none).")
flags.DEFINE_string(
    "input_file", None, "A model trained on pairs: a text file to translate, one input per line."
)
flags.DEFINE_string("output_file", None, "Where --input_file's outputs go (must not exist yet).")
flags.DEFINE_integer("batch_size", 64, "Translating: inputs decoded together.")
flags.DEFINE_bool("cache", True, "Use the KV cache (off: recompute everything per token).")
flags.DEFINE_bool(
    "print_ids",
    False,
    "Also print the new token ids (to compare with another "
    "implementation, e.g. Hugging Face's generate on an imported model).",
)


def load_workdir(workdir: str):
  """(model config, params, tokenizer, run config) of the workdir's latest checkpoint."""
  # pylint: disable=g-import-not-at-top
  from vit_jax import checkpoint
  from vit_jax import errors
  from vit_jax import interop
  from vit_jax import storage
  from vit_jax import workdir as workdir_lib
  from vit_jax.data import tokenizers
  from vit_jax.interop import orbax_format

  step_dirs = checkpoint.step_dirs(workdir)
  if not step_dirs:
    raise errors.MissingFileError(f"No checkpoints in {workdir!r}: train first with vit_jax.main.")
  step_dir, (params, record) = checkpoint.first_intact(step_dirs, orbax_format.read_step)
  step = storage.name(step_dir)
  run_config = json.loads(storage.read_text(workdir_lib.config_path(workdir)))
  tokenizer = tokenizers.load_tokenizer(workdir_lib.tokenizer_dir(workdir))
  expected = record.get("task", {}).get("tokenizer")
  if expected is not None:
    tokenizers.check_fingerprint(tokenizer, expected, context=f"checkpoint {step} in {workdir}")
  return record["model"], interop.unflatten(params), tokenizer, run_config


def encode_prompt(tokenizer, text: str, where: str = "--prompt") -> list[int]:
  """Token ids of `text`; characters a char tokenizer never saw are an error, not silent UNKs."""
  from vit_jax import errors  # pylint: disable=g-import-not-at-top

  ids = tokenizer.encode(text)
  if tokenizer.kind == "char" and tokenizer.unk_id in ids:
    unknown = sorted({c for c in text if tokenizer.encode(c) == [tokenizer.unk_id]})
    raise errors.ConfigError(
        f"{where} has characters the workdir's tokenizer never saw: "
        f"{''.join(unknown)!r}; leave them out."
    )
  return ids


def check_files() -> None:
  """A ConfigError unless --input_file can be read and --output_file is new."""
  # pylint: disable=g-import-not-at-top
  from vit_jax import errors
  from vit_jax import storage

  if FLAGS.prompt and FLAGS.input_file:
    raise errors.ConfigError("pass --prompt or --input_file, not both.")
  if bool(FLAGS.input_file) != bool(FLAGS.output_file):
    raise errors.ConfigError("--input_file and --output_file go together; pass both.")
  if not FLAGS.input_file:
    return
  if not storage.isfile(FLAGS.input_file):
    raise errors.MissingFileError(f"--input_file {FLAGS.input_file} is not a file.")
  if storage.exists(FLAGS.output_file):
    raise errors.ConfigError(
        f"--output_file {FLAGS.output_file} exists; choose a new file (nothing was written)."
    )


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
  if not FLAGS.workdir or not (FLAGS.prompt or FLAGS.input_file):
    print(
        "error: --workdir and at least one --prompt (or an --input_file) are required.",
        file=sys.stderr,
    )
    sys.exit(2)
  # pylint: disable=g-import-not-at-top
  from vit_jax import errors
  from vit_jax import storage
  from vit_jax import tasks
  from vit_jax import translate
  from vit_jax.config import checks
  from vit_jax.config import defaults as config_defaults
  from vit_jax.models import sampling

  try:
    checks.validate_generation(
        max_new_tokens=FLAGS.max_new_tokens,
        temperature=FLAGS.temperature,
        top_k=FLAGS.top_k,
        top_p=FLAGS.top_p,
        beam_size=FLAGS.beam_size,
    )
    if FLAGS.batch_size < 1 or not FLAGS.length_penalty >= 0:
      raise errors.ConfigError(
          f"--batch_size={FLAGS.batch_size} must be >= 1 and --length_penalty="
          f"{FLAGS.length_penalty} >= 0."
      )
    check_files()
    model_config, params, tokenizer, run_config = load_workdir(FLAGS.workdir)
    task = run_config["task"]
    translates = tasks.examples_of(config_defaults.from_saved(run_config)) == "pairs"
    if FLAGS.input_file and not translates:
      raise errors.ConfigError(
          f"--input_file translates with a workdir trained on pairs; {FLAGS.workdir} trained a "
          f"{task!r} model on documents: pass --prompt."
      )
    max_new_tokens = FLAGS.max_new_tokens
    if translates and not FLAGS["max_new_tokens"].present:
      max_new_tokens = translate.default_new_tokens(run_config)
    if translates:
      translate.check_settings(
          run_config,
          max_new_tokens=max_new_tokens,
          where=f"--max_new_tokens with {FLAGS.workdir}",
      )
    if FLAGS.input_file:
      lines = storage.read_text(FLAGS.input_file).splitlines()
      where = lambda i: f"line {i + 1} of --input_file {FLAGS.input_file}"
      prompts = [encode_prompt(tokenizer, line, where(i)) for i, line in enumerate(lines)]
    else:
      prompts = [encode_prompt(tokenizer, p) for p in FLAGS.prompt]
    if translates:
      outputs = translate.translate(
          run_config,
          model_config,
          params,
          tokenizer,
          prompts,
          batch_size=FLAGS.batch_size,
          max_new_tokens=max_new_tokens,
          beam_size=FLAGS.beam_size,
          length_penalty=FLAGS.length_penalty,
      )
      if FLAGS.input_file:
        with storage.open(FLAGS.output_file, "x", encoding="utf-8") as f:
          f.write("".join(line + "\n" for line in outputs))
      for prompt, out in zip(FLAGS.prompt, outputs):
        print(f"{prompt} -> {out}")
    elif tasks.TASKS[task].generates:
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
