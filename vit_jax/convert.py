"""Converts checkpoints: `python -m vit_jax.convert SRC DST --to npz|hf|orbax [options]`.

SRC is one of our workdirs (or one step's directory), an .npz (original ViT or big_vision
layout, or any of our models in our names) or a Hugging Face model directory (BERT, GPT-2, ViT,
and the Llama, Mistral, Qwen2 and Qwen3 causal LMs; config.json + model.safetensors or the shards
of model.safetensors.index.json, read a tensor at a time, and tokenizer.json if it has one). DST
is written completely or not at all.

The tokenizer travels with the weights: a workdir written here holds it in `DST/tokenizer` (as
training saves it, with a chat model's template) and a config.json naming the task, so an
imported GPT-2 or Llama generates at once (`python -m vit_jax.generate --workdir=DST
--prompt=...`); a Hugging Face directory written here gets `tokenizer.json`, its special tokens
and chat template when the source has a Hugging Face tokenizer. Our GPT with RoPE is written as
LlamaForCausalLM, Qwen2ForCausalLM (query/key/value biases) or Qwen3ForCausalLM (QK-norm), and
with learned positions as GPT-2. An .npz holds weights only.

  python -m vit_jax.convert workdirs/digits vit.npz --to npz
  python -m vit_jax.convert vit.npz vit_bv.npz --to npz --layout big_vision
  python -m vit_jax.convert vit.npz hf_vit --to hf
  python -m vit_jax.convert hf_bert bert_workdir --to orbax
  python -m vit_jax.convert hf_gpt2 gpt_workdir --to orbax   # then vit_jax.generate on it
  python -m vit_jax.convert hub/SmolLM2-135M llama_workdir --to orbax
  python -m vit_jax.convert llama_workdir llama_hf --to hf    # transformers loads it
  python -m vit_jax.convert hf_bert cls_workdir --to orbax --reinit-head \\
      --model '{"name": "bert_classifier", "num_classes": 3}'

--model takes JSON (or a JSON file): overrides of the model config read with SRC, or the whole
config for an .npz that is not recognized. --ema writes the EMA of a workdir's params (trained
with --config.ema_decay) instead of its params. Errors print one message and exit with code 2,
among them what ours does not compute (a sliding window, YaRN and other RoPE scalings, mixtures
of experts: docs/checkpoints.md).

  python -m vit_jax.convert workdirs/digits vit_ema.npz --to npz --ema

Python API: `convert(src, dst, to, model=None, reinit_head=False, layout="vit", fmt=None,
overwrite=False, ema=False)`, and `load` / `save` / `from_tree` (see vit_jax.interop).
"""

import argparse
import json
import sys

from vit_jax import errors
from vit_jax import startup
from vit_jax import storage
from vit_jax.interop import convert
from vit_jax.interop import FORMATS
from vit_jax.interop import LAYOUTS


def _model_arg(text: str | None) -> dict | None:
  if not text:
    return None
  if storage.isfile(text):
    text = storage.read_text(text)
  try:
    value = json.loads(text)
  except json.JSONDecodeError as e:
    raise errors.ConfigError(
        f"--model must be JSON (or a JSON file), e.g. '{{\"num_classes\": 10}}': " f"{e}"
    ) from e
  if not isinstance(value, dict):
    raise errors.ConfigError("--model must be a JSON object of model config keys.")
  return value


def parse_args(argv):
  parser = argparse.ArgumentParser(
      prog="python -m vit_jax.convert",
      description=__doc__,
      formatter_class=argparse.RawDescriptionHelpFormatter,
  )
  parser.add_argument("src", help="our workdir/checkpoint, an .npz, or a Hugging Face directory")
  parser.add_argument("dst", help="the file or directory to write")
  parser.add_argument("--to", choices=FORMATS, required=True, help="format to write")
  parser.add_argument("--from", dest="fmt", choices=FORMATS, help="format of SRC (detected)")
  parser.add_argument(
      "--layout",
      choices=LAYOUTS,
      default="vit",
      help=".npz layout for a ViT: original ViT names or big_vision's",
  )
  parser.add_argument(
      "--model", help="JSON model config or overrides, e.g. '{\"num_classes\": 10}'"
  )
  parser.add_argument(
      "--reinit-head",
      action="store_true",
      help="re-initialize a task head that does not fit (e.g. another class count)",
  )
  parser.add_argument(
      "--ema",
      action="store_true",
      help="write the EMA of a workdir's params (trained with --config.ema_decay) instead",
  )
  parser.add_argument("--overwrite", action="store_true", help="replace DST if it exists")
  return parser.parse_args(argv)


def main(argv=None) -> int:
  startup.quiet_startup()  # orbax warns on every checkpoint read
  args = parse_args(argv)
  # pylint: disable-next=g-import-not-at-top
  from vit_jax import errors
  from vit_jax import workdir as workdir_lib

  try:
    workdir_lib.check_convert_paths(args.src, args.dst)  # before anything is read or written
    ckpt = convert(
        args.src,
        args.dst,
        args.to,
        model=_model_arg(args.model),
        reinit_head=args.reinit_head,
        layout=args.layout,
        fmt=args.fmt,
        overwrite=args.overwrite,
        ema=args.ema,
    )
  except Exception as e:  # pylint: disable=broad-except
    problem = e if isinstance(e, FileExistsError) else errors.user_problem(e, where=args.dst)
    if problem is None:
      raise
    print(f"error: {problem}", file=sys.stderr)
    return errors.exit_code(problem)
  print(f"model: {json.dumps(ckpt.model, sort_keys=True)}")
  for note in ckpt.notes:
    print(f"note: {note}")
  layout = ", big_vision layout" if args.to == "npz" and args.layout == "big_vision" else ""
  print(f"wrote {args.dst} ({args.to}{layout})")
  return 0


if __name__ == "__main__":
  sys.exit(main())
