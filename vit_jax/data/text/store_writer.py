"""Writing a token store (its format: vit_jax/data/text/token_store.py): a dataset's splits
tokenized once, in shards, by several processes on several hosts, resumable.

    prepare(config, output, workers=8, task_index=i, num_tasks=n)

1. The plan. Task 0 reads a `files:` dataset's files once, in parallel, counting each one's
   documents and refusing bad ones before anything is written (vit_jax/data/text/files.py
   `scan`). It makes the tokenizer the config describes (trained on the first
   `tokenizer.max_train_texts` texts of the training split, or loaded from `tokenizer.path`),
   saves it in DIR/tokenizer, the files' counts in DIR/files.json, then writes DIR/plan.json:
   the dataset and its data_dir, the read settings that decide what its splits hold
   (`datasets.read_settings`: a files: dataset's text_key and bad_documents, an hf: dataset's
   text column, subset and held-out slice), its kind, the tokenizer's settings and fingerprint,
   and each split's shards (an hf: dataset streamed from its files: one per file). The other
   tasks wait for the plan. A rerun reads the plan and goes on when it asks for the same store
   (a files: dataset's pattern matching the same files at the same sizes, files.json's), or
   stops naming what differs.
2. The shards. Task i tokenizes the shards k with k % n == i that are not done yet, `workers`
   at a time in worker processes. A shard's arrays are staged on local disk and put in place
   whole (a rename, or one upload each), then its NNNNN.json: a shard counts as done only once
   all of it is in place, so a shard an interruption cut short is tokenized again.
3. The manifest. The task that finds every shard done writes store.json, the only file training
   starts from.
"""

import contextlib
import json
import math
import multiprocessing
import os
import time
from typing import Callable, Optional, Sequence

import numpy as np

from vit_jax import data
from vit_jax import errors
from vit_jax import storage
from vit_jax.data import tokenizers
from vit_jax.data.text import checks
from vit_jax.data.text import datasets
from vit_jax.data.text import token_store

EXAMPLES_PER_SHARD = 100_000  # C4's 365 M documents: 3,650 shards of about 45 M tokens
_ENCODE_CHUNK = 1_000  # examples encoded per call (HF tokenizers encode a batch in parallel)
PLAN_WAIT_S = 3_600  # how long a task other than 0 waits for the plan (task 0 trains the tokenizer)


def splits_to_prepare(config) -> list[str]:
  """The splits a run of `config` reads from its dataset: the training split, then each split
  its evaluators read from the same dataset."""
  names = [config.train_split]
  return names + [s for s in checks.evaluated_splits(config) if s not in names]


def shard_counts(config, split_names: Sequence[str], examples_per_shard: int, inventory=None):
  """{split: its shards}: a pure function of the config and the files' `inventory` (a files:
  dataset's, files.Inventory), so every task computes the same."""
  shards = {}
  for split in split_names:
    if inventory is None:
      shards[split] = datasets.num_shards(
          config.dataset,
          split,
          examples_per_shard,
          data_dir=config.data_dir,
          read_options=data.read_options(config),
      )
      continue
    from vit_jax.data.text import files  # pylint: disable=g-import-not-at-top

    count = files.split_size(inventory.total, split)
    if count == 0:
      raise checks.too_few_documents(config.dataset, inventory.total)
    shards[split] = max(1, math.ceil(count / examples_per_shard))
  return shards


def make_plan(config, shards: dict, tokenizer, inventory=None) -> dict:
  """What the store will hold (task 0 writes it, the others read it): `shards` per split."""
  kind = _kind(config)
  plan = {
      "format": token_store.FORMAT,
      "version": token_store.VERSION,
      "dataset": config.dataset,
      "data_dir": _data_dir(config),
      "read_settings": datasets.read_settings(config.dataset, data.read_options(config)),
      "kind": kind,
      "fields": list(token_store.fields_of(kind, datasets.texts_per_example(config.dataset))),
      "labels": kind == "labeled",
      "tokenizer_settings": token_store.tokenizer_settings(config),
      "tokenizer_fingerprint": tokenizer.fingerprint,
      "dtype": token_store.token_dtype(tokenizer.vocab_size).str,
      "shards": shards,
  }
  if inventory is not None:  # files: how many there were, their documents, those left out
    plan["files"] = {
        "files": len(inventory.paths),
        "documents": inventory.total,
        "skipped": inventory.skipped,
    }
  return plan


def _data_dir(config) -> str | None:
  """Where the dataset is read from (TFDS's data_dir; None: TFDS's default), as an absolute path:
  another copy or TFDS version of the data must not add shards to the same store."""
  return None if config.data_dir is None else storage.absolute(config.data_dir)


def _kind(config) -> str:
  from vit_jax import tasks  # pylint: disable=g-import-not-at-top  (the task registry only)

  return tasks.examples_of(config)


def prepare(
    config,
    output: str,
    *,
    split_names: Optional[Sequence[str]] = None,
    examples_per_shard: int = EXAMPLES_PER_SHARD,
    workers: int = 1,
    task_index: int = 0,
    num_tasks: int = 1,
    report: Callable[[str], None] = print,
) -> bool:
  """Prepares this task's shards of the store at `output`; True when the store is finished (this
  task wrote or found store.json), False when other tasks still have shards to do."""
  if not 0 <= task_index < num_tasks:
    raise errors.ConfigError(f"--task_index={task_index} must be in [0, --num_tasks={num_tasks}).")
  split_names = list(split_names or splits_to_prepare(config))
  plan = _plan(config, output, split_names, examples_per_shard, task_index, workers, report)
  if storage.exists(storage.join(output, token_store.MANIFEST_FILE)):
    report(f"prepare: {output} is already a finished token store; nothing to do.")
    return True
  done = _done_shards(output, plan)
  mine = [
      (split, k)
      for split, count in plan["shards"].items()
      for k in range(count)
      if k % num_tasks == task_index
  ]
  jobs = [(output, plan, split, k, config.data_dir) for split, k in mine if (split, k) not in done]
  report(
      f"prepare: task {task_index} of {num_tasks}: {len(jobs)} of its {len(mine)} shards to "
      f"tokenize, {min(workers, len(jobs)) or 1} at a time, into {output}"
  )
  started, tokens = time.time(), 0
  for i, (split, k, examples, shard_tokens, seconds) in enumerate(_run(jobs, workers), 1):
    tokens += shard_tokens
    report(
        f"prepare: {split} shard {k + 1}/{plan['shards'][split]} done ({i}/{len(jobs)} of this "
        f"task's): {examples:,} examples, {shard_tokens:,} tokens in {seconds:.1f} s; "
        f"{tokens / max(time.time() - started, 1e-9):,.0f} tokens/s so far"
    )
  return finish(output, plan, report)


def _plan(config, output, split_names, examples_per_shard, task_index, workers, report) -> dict:
  """The store's plan: read (and checked) where one exists, made and written by task 0 else."""
  plan_path = storage.join(output, token_store.PLAN_FILE)
  made_here = not storage.exists(plan_path) and task_index == 0
  if made_here:
    _check_output(output)
    inventory = None
    if config.dataset.startswith(datasets.FILE_PREFIXES):  # read whole once, before any write
      from vit_jax.data.text import files  # pylint: disable=g-import-not-at-top

      inventory = files.scan(
          config.dataset,
          data.read_options(config),
          workers=workers,
          report=report,
      )
    shards = shard_counts(config, split_names, examples_per_shard, inventory)
    tokenizer = _tokenizer(config, output, report)
    if inventory is not None:  # with each file's size, which a rerun compares
      listed = {**inventory.to_json(), "sizes": _file_sizes(inventory.paths)}
      storage.replace_text(storage.join(output, token_store.FILES_FILE), json.dumps(listed))
    plan = make_plan(config, shards, tokenizer, inventory)
    storage.replace_text(plan_path, json.dumps(plan, indent=2))
  deadline = time.time() + PLAN_WAIT_S
  while not storage.exists(plan_path):
    if time.time() > deadline:
      raise errors.DataError(
          f"no {plan_path} after {PLAN_WAIT_S} s: start task 0 (--task_index=0), which writes it."
      )
    time.sleep(5)
  plan = json.loads(storage.read_text(plan_path))
  have = {
      "dataset": plan["dataset"],
      "kind": plan["kind"],
      "tokenizer": plan["tokenizer_settings"],
      "splits": list(plan["shards"]),
  }
  want = {
      "dataset": config.dataset,
      "kind": _kind(config),
      "tokenizer": token_store.tokenizer_settings(config),
      "splits": list(split_names),
  }
  if "data_dir" in plan:  # (a plan written before plans recorded it: unknown)
    have["data_dir"], want["data_dir"] = plan["data_dir"], _data_dir(config)
  if "read_settings" in plan:  # likewise: each setting named where it differs
    read = datasets.read_settings(config.dataset, data.read_options(config))
    for key in {**plan["read_settings"], **read}:
      have[key], want[key] = plan["read_settings"].get(key), read.get(key)
  differ = [key for key in have if have[key] != want[key]]
  if differ:
    listing = "; ".join(f"{k}: the store's {have[k]!r}, now {want[k]!r}" for k in differ)
    raise errors.DataError(
        f"--output={output} holds a token store of other settings ({listing}); use a new "
        "--output, or the settings it was made with. Nothing was changed."
    )
  if "files" in plan and not made_here:
    _check_files(config.dataset, output)
  return plan


def _file_sizes(paths) -> list[int]:
  """The size in bytes of each file of `paths`, from one listing per folder (nothing is read)."""
  listings, sizes = {}, []
  for path in paths:
    folder = storage.parent(path) or os.curdir  # (a relative pattern's files in the cwd)
    if folder not in listings:
      listings[folder] = storage.file_sizes(folder)
    sizes.append(listings[folder].get(storage.name(path), -1))
  return sizes


def _check_files(dataset: str, output: str) -> None:
  """A files: dataset's store is rerun on the files it was planned on: the pattern matches the
  same files, at the sizes files.json records (a listing, nothing read); a DataError naming the
  files added, removed or resized otherwise (they would be left out, or read at positions that
  moved)."""
  from vit_jax.data.text import files  # pylint: disable=g-import-not-at-top

  saved = json.loads(storage.read_text(storage.join(output, token_store.FILES_FILE)))
  planned = [path for path, _ in saved["files"]]
  now = files.paths(dataset)
  sizes_now = dict(zip(now, _file_sizes(now)))
  added = sorted(set(now) - set(planned))
  removed = [p for p in planned if p not in sizes_now]
  resized = [
      f"{p} ({size:,} bytes, now {sizes_now[p]:,})"
      for p, size in zip(planned, saved.get("sizes", ()))  # (a store made before it held sizes)
      if p in sizes_now and sizes_now[p] != size
  ]
  changes = [(added, "added"), (removed, "removed"), (resized, "resized")]
  listing = "; ".join(f"{what} {_first_few(paths)}" for paths, what in changes if paths)
  if listing:
    raise errors.DataError(
        f"--output={output} was planned on other files than {dataset} matches now ({listing}); "
        "prepare them into a new --output, or restore the files it was made from. Nothing was "
        "changed."
    )


def _first_few(items, count: int = 3) -> str:
  more = f" and {len(items) - count} more" if len(items) > count else ""
  return ", ".join(items[:count]) + more


def _check_output(output: str) -> None:
  """A new store goes into a new or empty folder (or one holding only the tokenizer and files.json
  of an attempt interrupted before its plan): nothing else there is replaced."""
  if not storage.exists(output):
    return
  before_plan = (storage.name(token_store.tokenizer_dir(output)), token_store.FILES_FILE)
  others = [
      name
      for name in (storage.listdir(output) if storage.isdir(output) else [output])
      if name not in before_plan and not name.startswith(".")
  ]
  if others:
    raise errors.DataError(
        f"--output={output} exists and is not an empty folder or a token store; name a new "
        "folder. Nothing was changed."
    )


def _tokenizer(config, output: str, report):
  """The config's tokenizer, saved in the store."""
  directory = token_store.tokenizer_dir(output)
  tc = config.tokenizer
  report(
      f"prepare: {'loading' if tc.path else 'training'} the {tc.kind} tokenizer"
      + ("" if tc.path else f" on the first {tc.max_train_texts:,} texts of {config.dataset}")
  )
  tokenizer = tokenizers.from_settings(
      tc,
      lambda: datasets.dataset_texts(
          config.dataset,
          "train",
          max_texts=tc.max_train_texts,
          data_dir=config.data_dir,
          read_options=data.read_options(config),
      ),
  )
  with storage.output_path(directory, overwrite=True) as staged:
    tokenizer.save(staged)
  return tokenizer


def _done_shards(output: str, plan: dict) -> set:
  done = set()
  for split in plan["shards"]:
    folder = storage.join(output, split)
    if not storage.isdir(folder):
      continue
    names = set(storage.listdir(folder))
    done |= {
        (split, k)
        for k in range(plan["shards"][split])
        if token_store.done_file(token_store.shard_name(k)) in names
    }
  return done


def _run(jobs, workers: int):
  """Each job's result as it finishes: in this process for one worker, else in a pool of
  `workers` fresh processes (spawned: TensorFlow and threads do not survive a fork)."""
  if workers <= 1 or len(jobs) <= 1:
    yield from map(write_shard, jobs)
    return
  context = multiprocessing.get_context("spawn")
  with context.Pool(min(workers, len(jobs))) as pool:
    yield from pool.imap_unordered(write_shard, jobs)
    # The workers exit on their own, releasing what they made: a terminated one leaves its
    # semaphores (tqdm's lock, which an hf: dataset's reader makes) for Python to warn about.
    pool.close()
    pool.join()


# Read once per worker process, for each store (its output and plan: a store made again at the
# same output, of other data, is another): its tokenizer, and a files: dataset's inventory.
_TOKENIZERS = {}
_INVENTORIES = {}


def _store_key(output: str, plan: dict) -> tuple:
  return output, json.dumps(plan, sort_keys=True)


def write_shard(job) -> tuple[str, int, int, int, float]:
  """Tokenizes shard k of a split and puts its files in place; (split, k, examples, tokens,
  seconds)."""
  output, plan, split, k, data_dir = job
  started = time.time()
  key = _store_key(output, plan)
  if key not in _TOKENIZERS:
    _TOKENIZERS[key] = tokenizers.load_tokenizer(token_store.tokenizer_dir(output))
    tokenizers.check_fingerprint(
        _TOKENIZERS[key], plan["tokenizer_fingerprint"], context=f"the plan of {output}"
    )
  tokenizer = _TOKENIZERS[key]
  dtype = np.dtype(plan["dtype"])
  fields, kind = plan["fields"], plan["kind"]
  shard = token_store.shard_name(k)
  folder = storage.join(output, split)
  storage.makedirs(folder)
  examples = _examples(output, plan, split, k, data_dir)
  lengths = {field: [] for field in fields}
  labels = []
  with contextlib.ExitStack() as stack:
    files = {}
    for field in fields:
      staged = stack.enter_context(
          storage.output_path(
              storage.join(folder, token_store.tokens_file(shard, field)), overwrite=True
          )
      )
      files[field] = stack.enter_context(open(staged, "wb"))
    while chunk := _take(examples, _ENCODE_CHUNK):
      columns, chunk_labels = _columns(kind, chunk, len(fields))
      labels.extend(chunk_labels)
      for field, texts in zip(fields, columns):
        for ids in tokenizer.encode_batch(texts):
          files[field].write(np.asarray(ids, dtype).tobytes())
          lengths[field].append(len(ids))
    for f in files.values():
      f.close()
  count = len(lengths[fields[0]])
  for field in fields:
    offsets = np.concatenate([[0], np.cumsum(lengths[field], dtype=np.int64)]).astype(
        token_store.OFFSET_DTYPE
    )
    _put(storage.join(folder, token_store.offsets_file(shard, field)), offsets.tobytes())
  if plan["labels"]:
    _put(
        storage.join(folder, token_store.labels_file(shard)),
        np.asarray(labels, token_store.LABEL_DTYPE).tobytes(),
    )
  counts = {"examples": count, "tokens": {f: int(sum(lengths[f])) for f in fields}}
  storage.replace_text(storage.join(folder, token_store.done_file(shard)), json.dumps(counts))
  return split, k, count, sum(counts["tokens"].values()), time.time() - started


def _examples(output: str, plan: dict, split: str, k: int, data_dir):
  """The examples of shard k of `split`: a files: dataset's read from the range of positions
  it covers, starting at its own file (the inventory in files.json). Each is read with the
  plan's read settings."""
  read_options = data.ReadOptions(**plan.get("read_settings", {}))
  if "files" not in plan:
    return datasets.read_examples(
        plan["dataset"],
        split,
        kind=plan["kind"],
        data_dir=data_dir,
        shard=k,
        shard_count=plan["shards"][split],
        read_options=read_options,
    )
  from vit_jax.data.text import files  # pylint: disable=g-import-not-at-top

  key = _store_key(output, plan)
  if key not in _INVENTORIES:
    saved = json.loads(storage.read_text(storage.join(output, token_store.FILES_FILE)))
    _INVENTORIES[key] = files.Inventory.from_json(saved)
  return files.documents(
      plan["dataset"],
      split,
      read_options,
      shard=k,
      shard_count=plan["shards"][split],
      inventory=_INVENTORIES[key],
      warn=False,  # the inventory warned of each
  )


def _take(iterator, n: int) -> list:
  chunk = []
  for example in iterator:
    chunk.append(example)
    if len(chunk) == n:
      break
  return chunk


def _columns(kind: str, chunk: list, count: int) -> tuple[list[list[str]], list[int]]:
  """The texts of each field of `chunk`'s examples, and their labels."""
  if kind == "documents":
    return [chunk], []
  if kind == "pairs":
    return [[s for s, _ in chunk], [t for _, t in chunk]], []
  return [[texts[i] for texts, _ in chunk] for i in range(count)], [label for _, label in chunk]


def _put(path: str, data: bytes) -> None:
  with storage.output_path(path, overwrite=True) as staged:
    with open(staged, "wb") as f:
      f.write(data)


def finish(output: str, plan: dict, report=print) -> bool:
  """Writes store.json if every shard is done; whether the store is finished."""
  manifest_path = storage.join(output, token_store.MANIFEST_FILE)
  if storage.exists(manifest_path):
    return True
  splits = {}
  left = 0
  for split, count in plan["shards"].items():
    folder = storage.join(output, split)
    names = set(storage.listdir(folder)) if storage.isdir(folder) else set()
    entries = []
    for k in range(count):
      shard = token_store.shard_name(k)
      if token_store.done_file(shard) not in names:
        left += 1
        continue
      counts = json.loads(storage.read_text(storage.join(folder, token_store.done_file(shard))))
      entries.append({"name": shard, **counts})
    splits[split] = {
        "shards": entries,
        "examples": sum(e["examples"] for e in entries),
        "tokens": {f: sum(e["tokens"][f] for e in entries) for f in plan["fields"]},
    }
  if left:
    report(
        f"prepare: {left} shards are left to other tasks; the last task to finish writes "
        f"{token_store.MANIFEST_FILE}."
    )
    return False
  manifest = {
      **{k: v for k, v in plan.items() if k != "shards"},
      "splits": splits,
  }
  storage.replace_text(manifest_path, json.dumps(manifest, indent=1))
  for split, entry in splits.items():
    report(
        f"prepare: {split}: {entry['examples']:,} examples, "
        + ", ".join(f"{n:,} {f} tokens" for f, n in entry["tokens"].items())
        + f" in {len(entry['shards'])} shards"
    )
  report(f"prepare: {output} is ready: train with --config.token_store={output}")
  return True


def default_workers() -> int:
  return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
