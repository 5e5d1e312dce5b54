"""Text input from a token store: preparing it, positioning a resumed run, and keeping a host fed.

    python -m benchmarks.text_input [--tokens 120000000]

Generates English-like text (documents of Zipf-distributed words from a made-up vocabulary) as
`files:` documents, then:

(c) prepares a token store of it with `vit_jax.prepare`'s library (the GPT-2 recipe's tokenizer
    settings: byte-level BPE, 50,257 tokens, trained on the first 20,000 documents), one worker
    process, and reports tokens per second per core (CPU time of the tokenizing process);
(d) writes the documents of the first --format_files files again as parquet files (row groups of
    1,000 rows) and as jsonl.zst files ({"id", "text"} records), and prepares each of the three
    forms of that text in rounds (median; each round begins with another form: the same
    preparation measured up to 16% slower later in a process), with (c)'s tokenizer loaded
    rather than trained and encoding on one thread (TOKENIZERS_PARALLELISM=false: the CPU time
    of its threads varied by a fifth on a busy machine), so that only reading differs; and times
    reading alone (counting and checking every document, then each split's documents, as
    prepare does);
(a) builds the GPT-2 recipe's training input (the task's `train_batches`, at one v5p host's
    batch) positioned at step 10 and at step 10^6 and times the first batch of each, in
    alternating rounds (median): a resume costs the same at any step;
(b) reads batches of the GPT-2 and BERT-base recipes' training input from the store at one
    host's batch and sets tokens per CPU-second against what one v5p host's step consumes per
    core at most: the host's 4 chips at their peak bf16 FLOP/s (vit_jax/tpu_planning/chips.py) over
    the model's training FLOPs per token, a bound no step reaches (100% MFU), over its 208 cores.
    BERT reads the same store, with the store's tokenizer in place of its recipe's SentencePiece
    one (the rows, masking and next-sentence pairs are the recipe's).
"""

import argparse
import json
import math
import os
import shutil
import statistics
import tempfile
import time

import numpy as np

from benchmarks import input_pipeline

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKENIZER = {"kind": "byte_bpe", "vocab_size": 50_257}  # configs/gpt.py's documented command
RECIPES = {  # name -> (config file, argument)
    "GPT-2 124M": ("gpt.py", "variant=gpt2"),
    "BERT-base, 128 tokens": ("bert.py", "variant=base,nsp"),
    "BERT-base, 512 tokens": ("bert.py", "variant=base,nsp,phase=2"),
}


def generate_text(folder: str, tokens: int, words_per_file: int = 2_000_000) -> str:
  """About `tokens` BPE tokens of text (0.95 tokens per word, measured) in files of documents
  separated by blank lines; the `paragraphs:` dataset of them."""
  rng = np.random.default_rng(0)
  syllables = "ka lo mi ne ru sa te vi do pe an or is th er in en on".split()
  vocabulary = ["".join(rng.choice(syllables, int(rng.integers(1, 4)))) for _ in range(20_000)]
  ranks = np.arange(1, len(vocabulary) + 1)
  weights = 1 / ranks / np.sum(1 / ranks)
  words = int(tokens / 0.95)
  for f in range(math.ceil(words / words_per_file)):
    n = min(words_per_file, words - f * words_per_file)
    chosen = rng.choice(len(vocabulary), n, p=weights)
    lengths = rng.integers(50, 1500, size=n // 50)
    cuts = np.cumsum(lengths)
    cuts = cuts[cuts < n]
    documents = [" ".join(vocabulary[i] for i in part) + "." for part in np.split(chosen, cuts)]
    with open(os.path.join(folder, f"part{f:04d}.txt"), "w", encoding="utf-8") as out:
      out.write("\n\n".join(documents))
  return f"paragraphs:{folder}/*.txt"


def write_formats(dataset: str, folder: str, count: int) -> dict:
  """The documents of the first `count` files of `dataset` (a paragraphs: dataset of .txt files)
  as .txt files (links), parquet files and jsonl.zst files, one of each per .txt file:
  {extension: the dataset of them}."""
  # pylint: disable=g-import-not-at-top
  import pyarrow as pa
  import pyarrow.parquet as pq
  import zstandard

  from vit_jax.data.text import files

  names = {".txt": f"paragraphs:{folder}/txt/*.txt"}
  for ext in (".txt", ".parquet", ".jsonl.zst"):
    os.makedirs(os.path.join(folder, ext.strip(".")))
    names.setdefault(ext, f"files:{folder}/{ext.strip('.')}/*{ext}")
  for path in files.paths(dataset)[:count]:
    os.link(path, os.path.join(folder, "txt", os.path.basename(path)))
    with open(path, encoding="utf-8") as f:
      documents = files.paragraphs(f.read())
    stem = os.path.splitext(os.path.basename(path))[0]
    table = pa.table({"id": np.arange(len(documents)), "text": documents})
    pq.write_table(table, os.path.join(folder, "parquet", stem + ".parquet"), row_group_size=1_000)
    lines = "".join(json.dumps({"id": i, "text": d}) + "\n" for i, d in enumerate(documents))
    with open(os.path.join(folder, "jsonl.zst", stem + ".jsonl.zst"), "wb") as f:
      f.write(zstandard.ZstdCompressor().compress(lines.encode("utf-8")))
  return names


def load_config(recipe: str, dataset: str, store: str):
  from vit_jax.config import args  # pylint: disable=g-import-not-at-top

  file, arg = RECIPES[recipe]
  config = args.load_file(os.path.join(ROOT, "configs", file)).get_config(f"dataset=embedded,{arg}")
  config.dataset, config.token_store = dataset, store
  config.tokenizer.update(**TOKENIZER, path=None, max_train_texts=20_000)
  return config


def prepare(dataset: str, out: str, tokenizer: str | None = None) -> dict:
  """Prepares the train split of `dataset` into `out` (the tokenizer trained, or loaded from
  `tokenizer`, a tokenizer.json), in this process; its tokens per CPU-second."""
  from vit_jax.data.text import store_writer  # pylint: disable=g-import-not-at-top

  config = load_config("GPT-2 124M", dataset, None)
  config.tokenizer.path = tokenizer
  started, cpu = time.perf_counter(), time.process_time()
  store_writer.prepare(config, out, split_names=["train"], workers=1, report=print)
  wall, cpu = time.perf_counter() - started, time.process_time() - cpu
  with open(os.path.join(out, "store.json"), encoding="utf-8") as f:
    tokens = json.load(f)["splits"]["train"]["tokens"]["text"]
  return {"tokens": tokens, "wall_s": wall, "cpu_s": cpu, "tokens_per_cpu_second": tokens / cpu}


def compare_formats(dataset: str, store: str, scratch: str, args) -> dict:
  """(d): {extension: its median tokens per CPU-second, median ratio to .txt's, reading's CPU
  seconds}."""
  # pylint: disable=g-import-not-at-top
  from vit_jax import data
  from vit_jax.data.text import files

  names = write_formats(dataset, os.path.join(scratch, "formats"), args.format_files)
  tokenizer = os.path.join(store, "tokenizer", "tokenizer.json")
  rates = {ext: [] for ext in names}
  order = list(names)
  parallelism = os.environ.get("TOKENIZERS_PARALLELISM")
  os.environ["TOKENIZERS_PARALLELISM"] = "false"  # read by the tokenizers library at each call
  for r in range(args.format_rounds):
    for ext in order[r % len(order) :] + order[: r % len(order)]:  # each form first once
      out = os.path.join(scratch, f"store{ext}")
      row = prepare(names[ext], out, tokenizer)
      rates[ext].append(row)
      print(f"round {r}", ext, json.dumps(row), flush=True)
      shutil.rmtree(out)
  if parallelism is None:
    del os.environ["TOKENIZERS_PARALLELISM"]
  else:
    os.environ["TOKENIZERS_PARALLELISM"] = parallelism
  result = {}
  for ext, name in names.items():
    options = data.read_options(load_config("GPT-2 124M", name, None))  # as prepare reads them
    started = time.process_time()
    inventory = files.scan(name, options, report=None)
    for split in ("train", "validation"):
      for _ in files.documents(name, split, options, inventory=inventory, warn=False):
        pass
    over_txt = [
        a["tokens_per_cpu_second"] / b["tokens_per_cpu_second"]
        for a, b in zip(rates[ext], rates[".txt"])
    ]
    result[ext] = {
        "tokens": rates[ext][0]["tokens"],
        "tokens_per_cpu_second": statistics.median(r["tokens_per_cpu_second"] for r in rates[ext]),
        "over_txt": statistics.median(over_txt),
        "reading_cpu_s": time.process_time() - started,
    }
    assert result[ext]["tokens"] == result[".txt"]["tokens"], (ext, result[ext])  # the same text
  return result


def per_host(config) -> tuple[int, float]:
  """(the recipe's batch per v5p host, the tokens per second a host's step consumes at most)."""
  # pylint: disable=g-import-not-at-top
  from vit_jax import tasks
  from vit_jax.tpu_planning import aot
  from vit_jax.tpu_planning import chips
  from vit_jax.training import flops

  topology = aot.parse_topology(config.target_topology)
  num_chips = math.prod(int(n) for n in topology.shape.split("x"))
  hosts = max(1, num_chips // input_pipeline.V5P_CHIPS_PER_HOST)
  task = tasks.build_task_without_data(config)
  model_config = {**config.model.to_dict(), **task.model_overrides()}
  flops_per_token = (
      flops.train_flops_per_example(model_config, task.init_inputs(1)) / config.seq_len
  )
  peak = chips.BY_GENERATION["v5p"].bf16_flops
  return config.batch_size // hosts, input_pipeline.V5P_CHIPS_PER_HOST * peak / flops_per_token


def first_batch_seconds(task, step: int) -> float:
  started = time.perf_counter()
  next(iter(task.train_batches(step, 0, 1)))
  return time.perf_counter() - started


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
  parser.add_argument("--tokens", type=float, default=1.05e8, help="tokens of generated text")
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--batches", type=int, default=20, help="timed batches per recipe")
  parser.add_argument("--format_files", type=int, default=5, help="(d): files of 2 M words")
  parser.add_argument("--format_rounds", type=int, default=6, help="(d): rounds")
  args = parser.parse_args()
  # pylint: disable=g-import-not-at-top
  from vit_jax import data
  from vit_jax import tasks

  result = {"cores": input_pipeline.cores(), "load_average": os.getloadavg()[0]}
  with tempfile.TemporaryDirectory() as scratch:
    os.makedirs(os.path.join(scratch, "text"))
    dataset = generate_text(os.path.join(scratch, "text"), int(args.tokens))
    store = os.path.join(scratch, "store")
    result["prepare"] = prepare(dataset, store)
    print(json.dumps(result["prepare"]), flush=True)
    result["formats"] = compare_formats(dataset, store, scratch, args)
    print(json.dumps(result["formats"]), flush=True)
    with data.opened_once():
      gpt = load_config("GPT-2 124M", dataset, store)
      batch, _ = per_host(gpt)
      gpt.batch_size = batch
      task = tasks.build_task(gpt, os.path.join(scratch, "workdir"))
      times = {10: [], 10**6: []}
      for _ in range(args.rounds):
        for step in times:
          times[step].append(first_batch_seconds(task, step))
      result["first_batch_s"] = {str(k): statistics.median(v) for k, v in times.items()}
      print(json.dumps(result["first_batch_s"]), flush=True)
      result["recipes"] = {}
      for recipe in RECIPES:
        config = load_config(recipe, dataset, store)
        batch, need = per_host(config)
        config.batch_size = batch
        task = tasks.build_task(config, os.path.join(scratch, f"workdir-{len(result['recipes'])}"))
        batches = task.train_batches(123_456, 0, 1)
        next(batches)
        started, cpu = time.perf_counter(), time.process_time()
        for _ in range(args.batches):
          next(batches)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        tokens = args.batches * batch * config.seq_len
        row = {
            "topology": config.target_topology,
            "per_host_batch": batch,
            "seq_len": config.seq_len,
            "tokens_per_sec": tokens / wall,
            "tokens_per_cpu_second": tokens / cpu,
            "step_needs_per_host_at_most": need,
            "step_needs_per_core_at_most": need / input_pipeline.V5P_HOST_CORES,
        }
        row["supply_over_need"] = row["tokens_per_cpu_second"] / row["step_needs_per_core_at_most"]
        row["cores_needed"] = need / row["tokens_per_cpu_second"]
        result["recipes"][recipe] = row
        print(recipe, json.dumps(row), flush=True)
  print(json.dumps(result, indent=2))


if __name__ == "__main__":
  main()
