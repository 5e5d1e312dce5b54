"""A small TFDS text dataset built for real (files on disk, split metadata), for what
tfds.testing.mock_data cannot show: it ignores sub-splits, so each of a split's shards would read
the whole mock split."""

import numpy as np
import tensorflow_datasets as tfds

from vit_jax.data.text import datasets

NAME = "tiny_text_docs"
WORDS = "the a of data token store shard read index step epoch model text window".split()


class TinyTextDocs(tfds.core.GeneratorBasedBuilder):
  """Documents of 1-60 random words, in two splits, generated offline."""

  VERSION = tfds.core.Version("1.0.0")
  url_infos = None  # nothing to download
  SIZES = {"train": 230, "validation": 20}

  def _info(self):
    return tfds.core.DatasetInfo(
        builder=self, features=tfds.features.FeaturesDict({"text": tfds.features.Text()})
    )

  def _split_generators(self, dl_manager):
    del dl_manager
    return {split: self._generate_examples(split) for split in self.SIZES}

  def _generate_examples(self, split):
    rng = np.random.default_rng(list(self.SIZES).index(split))
    for i in range(self.SIZES[split]):
      yield i, {"text": " ".join(rng.choice(WORDS, int(rng.integers(1, 61))))}


def build(data_dir: str) -> None:
  tfds.builder(NAME, data_dir=data_dir).download_and_prepare()


def register(monkeypatch) -> str:
  """Adds the dataset to the text datasets' table for one test; its name."""
  monkeypatch.setitem(datasets.TFDS_DATASETS, NAME, datasets.TfdsText("documents", NAME, ("text",)))
  return NAME
