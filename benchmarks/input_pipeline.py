"""Input pipeline throughput: decoded, augmented 224-px images per second from TFDS data on disk.

A small TFDS dataset of ImageNet-sized JPEGs (smooth colour fields plus noise, so they compress
and decode like photos) is built into a data_dir, then read through our real training pipeline
(`pipeline.train_iterator`: shuffle, decode + Inception crop, resize, flip, normalize, batch).

    python -m benchmarks.input_pipeline [--recipe dataset=imagenet2012,variant=B/16]

reads them through a pod recipe's own input (the task's `train_batches`: its augmentation,
shuffle buffer and image size) at the recipe's per-host batch on its `target_topology`, and sets
the images/s per host core against what the step consumes per host core, at most: the host's
chips at their peak bf16 FLOP/s (tpu_planning/chips.py) over the model's training FLOPs per image, a
bound no step reaches (that is 100% MFU), shared by the host's cores.

    python -m benchmarks.input_pipeline --sources

writes the same JPEGs, byte for byte, in each other source's format (webdataset shards) and reads
each through the same training pipeline, rounds alternating between the sources, as images per
CPU-second beside the TFDS path's.

    python -m benchmarks.input_pipeline --hub

reads the same JPEGs, byte for byte, as an hf: dataset in the hub's layout (parquet with an Image
and a ClassLabel column, data/hub.py) and through TFDS, by the same training pipeline, and
compares their images per CPU-second.
"""

import argparse
import gc
import io
import json
import math
import os
import statistics
import tarfile
import tempfile
import time

import numpy as np
import tensorflow_datasets as tfds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "benchmark_jpegs"
# A TPU v5p host: 4 chips and 208 vCPUs (cloud.google.com/tpu/docs/v5p, "VM, host and slice
# properties").
V5P_CHIPS_PER_HOST = 4
V5P_HOST_CORES = 208


class BenchmarkJpegs(tfds.core.GeneratorBasedBuilder):
  """Random photo-like JPEGs of ImageNet's typical sizes, generated offline."""

  VERSION = tfds.core.Version("1.0.0")
  url_infos = None  # nothing to download
  NUM_IMAGES = 256

  def _info(self):
    return tfds.core.DatasetInfo(
        builder=self,
        features=tfds.features.FeaturesDict(
            {
                "image": tfds.features.Image(shape=(None, None, 3), encoding_format="jpeg"),
                "label": tfds.features.ClassLabel(num_classes=1000),
            }
        ),
        supervised_keys=("image", "label"),
    )

  def _split_generators(self, dl_manager):
    del dl_manager
    return {"train": self._generate_examples()}

  def _generate_examples(self):
    rng = np.random.default_rng(0)
    for i in range(self.NUM_IMAGES):
      height, width = (375, 500) if i % 2 else (500, 333)
      yy, xx = np.mgrid[0:height, 0:width] / max(height, width)
      base_HxWx3 = np.stack(
          [np.sin(6 * xx + c + rng.uniform(0, 6)) + np.cos(4 * yy * (c + 1)) for c in range(3)],
          axis=-1,
      )
      image = base_HxWx3 * 60 + 128 + rng.normal(0, 12, (height, width, 3))
      yield i, {"image": np.clip(image, 0, 255).astype(np.uint8), "label": i % 1000}


def prepare(data_dir: str, num_images: int = 256) -> None:
  tfds.disable_progress_bar()
  BenchmarkJpegs.NUM_IMAGES = num_images
  tfds.builder(NAME, data_dir=data_dir).download_and_prepare()


def images_per_sec(
    data_dir: str, batch_size: int = 32, image_size: int = 224, batches: int = 20, warmup: int = 3
) -> float:
  """Steady images/s of the training iterator (all cores of this process)."""
  from vit_jax.data.image import pipeline  # pylint: disable=g-import-not-at-top

  batches_it = pipeline.train_iterator(
      NAME,
      "train",
      global_batch_size=batch_size,
      image_size=image_size,
      seed=0,
      data_dir=data_dir,
      augment=pipeline.Augment(inception_crop=True, flip=True),
      process_index=0,
      process_count=1,
  )
  for _ in range(warmup):
    next(batches_it)
  start = time.perf_counter()
  for _ in range(batches):
    next(batches_it)
  return batches * batch_size / (time.perf_counter() - start)


def write_hub_copy(data_dir: str, root: str) -> str:
  """The benchmark's JPEGs, their encoded bytes as TFDS holds them, as a hub-layout folder
  (data/train-00000-of-00001.parquet); its hf: dataset name."""
  import datasets  # pylint: disable=g-import-not-at-top  (the data extra)

  datasets.disable_progress_bars()
  stored = tfds.builder(NAME, data_dir=data_dir).as_dataset(
      split="train", shuffle_files=False, decoders={"image": tfds.decode.SkipDecoding()}
  )
  examples = list(tfds.as_numpy(stored))
  features = datasets.Features(
      {"image": datasets.Image(), "label": datasets.ClassLabel(num_classes=1000)}
  )
  rows = datasets.Dataset.from_dict(
      {
          "image": [{"bytes": ex["image"], "path": None} for ex in examples],
          "label": [int(ex["label"]) for ex in examples],
      },
      features=features,
  )
  os.makedirs(os.path.join(root, "data"))
  rows.to_parquet(os.path.join(root, "data", "train-00000-of-00001.parquet"))
  return "hf:" + root


def images_per_cpu_second(
    dataset: str,
    data_dir: str,
    batches: int,
    warmup: int = 2,
    batch_size: int = 32,
    shuffle_buffer: int = 1_024,
    read_options=None,
) -> float:
  """Images per CPU-second of the training iterator on `dataset` (every thread of the process
  counted): 224 px, Inception crop and flip; `warmup` batches, then `batches` timed. The
  iterator is gone when this returns: a caller's gc.collect() stops its threads."""
  # pylint: disable-next=g-import-not-at-top
  from vit_jax import data
  from vit_jax.data.image import pipeline

  batches_it = pipeline.train_iterator(
      dataset,
      "train",
      global_batch_size=batch_size,
      image_size=224,
      seed=0,
      data_dir=data_dir,
      augment=pipeline.Augment(inception_crop=True, flip=True),
      shuffle_buffer=shuffle_buffer,
      process_index=0,
      process_count=1,
      read_options=read_options or data.ReadOptions(image_key="image", label_key="label"),
  )
  for _ in range(warmup):
    next(batches_it)
  cpu_start = time.process_time()
  for _ in range(batches):
    next(batches_it)
  return batches * batch_size / (time.process_time() - cpu_start)


def hub_row(data_dir: str, hub_root: str, batches: int, rounds: int = 3) -> dict:
  """TFDS and the hub's layout on the same JPEGs, alternated `rounds` times (a shared machine's
  load shifts between them): each one's best images per CPU-second, and hub over TFDS."""
  hub = write_hub_copy(data_dir, hub_root)
  cache = os.path.join(hub_root, "cache")
  rates = {"tfds": [], "hub": []}
  for _ in range(rounds):
    rates["tfds"].append(images_per_cpu_second(NAME, data_dir, batches))
    rates["hub"].append(images_per_cpu_second(hub, cache, batches))
  best = {source: max(values) for source, values in rates.items()}
  return {
      "images_per_cpu_second": rates,
      "best": best,
      "hub_over_tfds": best["hub"] / best["tfds"],
      "cores": cores(),
      "load_average": os.getloadavg()[0],
  }


def write_webdataset(data_dir: str, out_dir: str, per_shard: int = 64) -> str:
  """The benchmark's JPEGs as webdataset shards (KEY.jpg, KEY.cls; the TFDS records' bytes);
  returns the dataset name."""
  builder = tfds.builder(NAME, data_dir=data_dir)
  examples = builder.as_dataset(
      split="train", shuffle_files=False, decoders={"image": tfds.decode.SkipDecoding()}
  )
  tar = None
  for i, example in enumerate(examples.as_numpy_iterator()):
    if i % per_shard == 0:
      if tar:
        tar.close()
      tar = tarfile.open(os.path.join(out_dir, f"{NAME}-train-{i // per_shard:04d}.tar"), "w")
    label = str(example["label"]).encode()
    for name, data in ((f"{i:06d}.jpg", example["image"]), (f"{i:06d}.cls", label)):
      member = tarfile.TarInfo(name)
      member.size = len(data)
      tar.addfile(member, io.BytesIO(data))
  tar.close()
  return "wds:" + out_dir


# Other formats of the same JPEGs: name -> (data_dir, a new folder) -> the dataset to read.
SOURCES = {"webdataset": write_webdataset}


def source_rows(data_dir: str, rounds: int = 3, batches: int = 32, batch_size: int = 32) -> list:
  """Images per CPU-second of the TFDS path and of each of SOURCES on the same JPEGs, through the
  same training pipeline (Inception crop, flip, 224 px). A round reads each source in turn, alone
  in the process: a new pipeline, one epoch to fill its buffers, then `batches` timed batches;
  each source's median round."""
  from vit_jax import data  # pylint: disable=g-import-not-at-top

  datasets = {"tfds": NAME}
  folder = tempfile.mkdtemp(dir=data_dir)
  for name, write in SOURCES.items():
    os.makedirs(os.path.join(folder, name))
    datasets[name] = write(data_dir, os.path.join(folder, name))
  per_cpu_second = {name: [] for name in datasets}
  for _ in range(rounds):
    for name, dataset in datasets.items():
      per_cpu_second[name].append(
          images_per_cpu_second(
              dataset,
              data_dir,
              batches,
              warmup=BenchmarkJpegs.NUM_IMAGES // batch_size,
              batch_size=batch_size,
              shuffle_buffer=10_000,
              read_options=data.ReadOptions(label_key="label"),  # a sample's KEY.cls comes first
          )
      )
      gc.collect()  # the pipeline's threads stop before the next source is timed
  tfds_rate = statistics.median(per_cpu_second["tfds"])
  return [
      {
          "source": name,
          "dataset": datasets[name],
          "images_per_cpu_second": statistics.median(rates),
          "rounds": rates,
          "over_tfds": statistics.median(rates) / tfds_rate,
          "cores": cores(),
          "load_average": os.getloadavg()[0],
      }
      for name, rates in per_cpu_second.items()
  ]


def cores() -> int:
  return len(os.sched_getaffinity(0))


def recipe_row(data_dir: str, recipe: str, batches: int = 3, warmup: int = 1) -> dict:
  """The recipe's input on this machine's cores against its step's needs per v5p host core."""
  # pylint: disable=g-import-not-at-top
  from vit_jax import tasks
  from vit_jax.config import args
  from vit_jax.tpu_planning import aot
  from vit_jax.tpu_planning import chips
  from vit_jax.training import flops

  config = args.load_file(os.path.join(ROOT, "configs", "vit.py")).get_config(recipe)
  topology = aot.parse_topology(config.target_topology)
  assert topology.generation == "v5p", topology
  num_chips = math.prod(int(n) for n in topology.shape.split("x"))
  hosts = num_chips // V5P_CHIPS_PER_HOST
  per_host_batch = config.batch_size // hosts
  task = tasks.build_task_without_data(config)
  model_config = {**config.model.to_dict(), **task.model_overrides()}
  flops_per_image = flops.train_flops_per_example(model_config, task.init_inputs(1))
  peak = chips.BY_GENERATION["v5p"].bf16_flops
  consumed_per_host = V5P_CHIPS_PER_HOST * peak / flops_per_image  # at 100% MFU: an upper bound
  # The recipe's own input (its augmentation, shuffle buffer, image size) on the generated JPEGs,
  # one host's batch.
  config.update(dataset=NAME, data_dir=data_dir, batch_size=per_host_batch)
  batches_it = task.train_batches(0, 0, 1)
  for _ in range(warmup):
    next(batches_it)
  start, cpu_start = time.perf_counter(), time.process_time()
  for _ in range(batches):
    next(batches_it)
  images = batches * per_host_batch
  rate = images / (time.perf_counter() - start)
  # Per core from the CPU time the pipeline's threads used: what one core does when it is free,
  # also on a machine that other work shares.
  per_core = images / (time.process_time() - cpu_start)
  needed_per_core = consumed_per_host / V5P_HOST_CORES
  return {
      "recipe": recipe,
      "topology": config.target_topology,
      "hosts": hosts,
      "per_host_batch": per_host_batch,
      "augment": {k: v for k, v in config.augment.to_dict().items() if v},
      "cores": cores(),
      "images_per_sec": rate,
      "images_per_cpu_second": per_core,
      "train_gflops_per_image": flops_per_image / 1e9,
      "step_needs_per_host_at_most": consumed_per_host,
      "step_needs_per_core_at_most": needed_per_core,
      "supply_over_need": per_core / needed_per_core,
      "load_average": os.getloadavg()[0],
  }


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
  parser.add_argument("--recipe", default="dataset=imagenet2012,variant=B/16")
  parser.add_argument("--images", type=int, default=512, help="JPEGs generated")
  parser.add_argument("--batches", type=int, default=3, help="timed batches, after one warm-up")
  parser.add_argument(
      "--hub", action="store_true", help="hf: (hub parquet) against TFDS on the same JPEGs"
  )
  parser.add_argument(
      "--sources", action="store_true", help="the TFDS path against the other formats instead"
  )
  args = parser.parse_args()
  if args.hub:
    with tempfile.TemporaryDirectory() as data_dir:
      prepare(data_dir, args.images)
      row = hub_row(data_dir, os.path.join(data_dir, "hub"), batches=max(args.batches, 16))
    print(json.dumps(row, indent=2))
    print(
        f"hub parquet {row['best']['hub']:.1f} img per CPU-second, TFDS "
        f"{row['best']['tfds']:.1f}: {row['hub_over_tfds']:.3f} of TFDS's rate",
        flush=True,
    )
    return
  with tempfile.TemporaryDirectory() as data_dir:
    prepare(data_dir, args.images)
    if args.sources:
      for row in source_rows(data_dir):
        print(json.dumps(row))
        print(
            f"{row['source']}: {row['images_per_cpu_second']:.1f} img per CPU-second, "
            f"{row['over_tfds']:.2f}x the TFDS path's",
            flush=True,
        )
      return
    row = recipe_row(data_dir, args.recipe, batches=args.batches)
  print(json.dumps(row, indent=2))
  print(
      f"{row['recipe']} on {row['topology']}: batch {row['per_host_batch']} per host; input "
      f"{row['images_per_cpu_second']:.1f} img/s per core (CPU time; {row['cores']} cores here, "
      f"{row['images_per_sec']:.1f} img/s wall), step "
      f"needs at most {row['step_needs_per_core_at_most']:.1f} img/s per core of a v5p host "
      f"({V5P_HOST_CORES} cores): {row['supply_over_need']:.2f}x",
      flush=True,
  )


if __name__ == "__main__":
  main()
