"""docs/pod.md's table of the paper recipes compiled on their slices: the rows and their commands,
and a row's markdown from its compile report. `python -m vit_jax.compile --table` compiles every
row and prints the table and the commands (with `--table_row=NAME`, only that row and its line);
tests/scale/test_aot_tpu.py reruns rows' commands and checks that they reproduce their rows.
"""

from absl import flags
from ml_collections import config_flags

from vit_jax.config import args as config_args
from vit_jax.models import gpt
from vit_jax.tpu_planning import aot

# The paper recipes exactly as their configs define them (batch, slice, head, position
# embedding), each on its config's target_topology, in the table's order. The flags beyond
# --config give what the data would (the vocabulary), as the configs' own recipe commands do.
_BERT_VOCAB = ("--config.tokenizer.kind=spm_unigram", "--config.tokenizer.vocab_size=30522")


def _decoder(variant: str) -> tuple:
  """A DECODERS preset's row flags: its config on C4, a byte-level BPE of its vocabulary."""
  return (
      f"--config=configs/gpt.py:dataset=c4,variant={variant}",
      "--config.tokenizer.kind=byte_bpe",
      f"--config.tokenizer.vocab_size={gpt.DECODERS[variant]['vocab_size']}",
  )


ROWS = (
    ("ViT-S/16, ImageNet-1k", ("--config=configs/vit.py:dataset=imagenet2012,variant=S/16",)),
    ("ViT-B/16, ImageNet-1k", ("--config=configs/vit.py:dataset=imagenet2012,variant=B/16",)),
    ("ViT-L/16, ImageNet-1k", ("--config=configs/vit.py:dataset=imagenet2012,variant=L/16",)),
    ("ViT-S/16, ImageNet-21k", ("--config=configs/vit.py:dataset=imagenet21k,variant=S/16",)),
    ("ViT-B/16, ImageNet-21k", ("--config=configs/vit.py:dataset=imagenet21k,variant=B/16",)),
    ("ViT-L/16, ImageNet-21k", ("--config=configs/vit.py:dataset=imagenet21k,variant=L/16",)),
    ("ViT-g/14, ImageNet-21k", ("--config=configs/vit.py:dataset=imagenet21k,variant=g/14",)),
    ("ViT-G/14, ImageNet-21k", ("--config=configs/vit.py:dataset=imagenet21k,variant=G/14",)),
    (
        "GPT-2 124M",
        (
            "--config=configs/gpt.py:dataset=c4,variant=gpt2",
            "--config.tokenizer.kind=byte_bpe",
            "--config.tokenizer.vocab_size=50257",
        ),
    ),
    ("SmolLM2-135M", _decoder("smollm2-135m")),
    ("SmolLM2-360M", _decoder("smollm2-360m")),
    ("Qwen2.5-0.5B", _decoder("qwen2.5-0.5b")),
    ("Llama-3.2-1B", _decoder("llama3.2-1b")),
    ("Llama-3.1-8B", _decoder("llama3.1-8b")),
    (
        "Transformer base, WMT'14 en-de",
        ("--config=configs/seq2seq.py:dataset=wmt14_translate/de-en,variant=base",),
    ),
    (
        "BERT-base, 128 tokens",
        ("--config=configs/bert.py:dataset=wikipedia,variant=base,nsp", *_BERT_VOCAB),
    ),
    (
        "BERT-base, 512 tokens",
        ("--config=configs/bert.py:dataset=wikipedia,variant=base,nsp,phase=2", *_BERT_VOCAB),
    ),
    (
        "BERT-large, 128 tokens",
        ("--config=configs/bert.py:dataset=wikipedia,variant=large,nsp", *_BERT_VOCAB),
    ),
    (
        "BERT-large, 512 tokens",
        ("--config=configs/bert.py:dataset=wikipedia,variant=large,nsp,phase=2", *_BERT_VOCAB),
    ),
)
HEADER = (
    "| Recipe | Slice (chips) | Batch | Memory per chip | Fits | TFLOP per chip per step: XLA "
    "(model) | Sent per chip per step, lower bound | Step time, lower bound | MFU, upper bound "
    "| Chip-hours, lower bound (steps) |"
)


def command(args) -> str:
  """A row's command as docs/pod.md writes it: 4-space indented, wrapped before 100 columns."""
  lines = ["python -m vit_jax.compile"]
  for arg in args:
    if len(lines[-1]) + len(arg) > 92:
      lines[-1] += " \\"
      lines.append("    " + arg)
    else:
      lines[-1] += " " + arg
  return "\n".join("    " + line for line in lines)


def commands() -> str:
  """The rows' commands, each under its recipe's name, as docs/pod.md lists them."""
  return "\n".join(f"    # {name}\n{command(args)}" for name, args in ROWS)


def config_of(args, root: str):
  """The config a row's flags give (its config file under `root`), parsed as the command line
  parses them."""
  argv = ["vit_jax.compile"] + [a.replace("--config=", f"--config={root}/", 1) for a in args]
  flag_values = flags.FlagValues()
  config_flags.DEFINE_config_file(
      "config", None, "", flag_values=flag_values, lock_config=True, sys_argv=argv
  )
  config_args.parse_command_line(flag_values, argv)
  return flag_values.config


def fits(report) -> str:
  """The table's verdict: yes, only without headroom, or no."""
  if report.fits:
    return "yes"
  return "only without headroom" if report.total_bytes <= report.hbm_bytes else "no"


def markdown_row(name: str, topology: str, report) -> str:
  """One row of the table from the row's aot.Report."""
  sent = sum(t.ici_bytes + t.dcn_bytes for t in report.collectives.values())
  cells = [
      name,
      f"{topology} ({report.num_devices})",
      f"{report.batch_size}",
      f"{report.total_bytes / aot.GIB:.2f} GiB",
      fits(report),
      f"{(report.xla_flops or 0) / 1e12:.2f} ({report.model_flops / 1e12:.2f})",
      aot.format_bytes(sent),
      aot.format_seconds(report.roofline().lower_bound),
      f"{aot.format_count(100 * report.mfu_bound())}%",
      f"{aot.format_count(report.chip_hours_bound())} ({report.total_steps:,})",
  ]
  return "| " + " | ".join(cells) + " |"


def markdown(rows: list[str]) -> str:
  """The table (HEADER and `rows`), a blank line, and the rows' commands."""
  separator = "|" + "---|" * (HEADER.count(" | ") + 1)
  return "\n".join([HEADER, separator, *rows, "", commands()])


def read(text: str) -> dict[str, list[str]]:
  """{recipe: its other cells} of the table in a document's `text` (docs/pod.md), in order."""
  rows = {}
  for line in text.split(HEADER + "\n", 1)[1].splitlines()[1:]:
    if not line.startswith("| "):
      break
    cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
    rows[cells[0]] = cells[1:]
  return rows
