"""Small datasets in the Hugging Face hub's layouts, written offline by the `datasets` library
itself (parquet with the library's feature metadata, and `save_to_disk` folders), for the hf:
tests and for the documented hf: commands (`stand_in`).

    write_text(root, {"train": docs, "validation": docs})   # root/data/train-00000-of-00001.parquet
    write_images(root, {"train": [(jpeg, "cat"), ...]}, ("cat", "dog"))
"""

import io
import os

import numpy as np

from vit_jax import data
from vit_jax.data.text import corpus


def datasets_library():
  import datasets  # pylint: disable=g-import-not-at-top  (the data extra)

  datasets.disable_progress_bars()
  return datasets


def write_split(rows, folder: str, split: str, files: int) -> None:
  """`rows` (a datasets.Dataset) as `files` parquet files named as the hub names them."""
  os.makedirs(folder, exist_ok=True)
  for k in range(files):
    part = rows.shard(num_shards=files, index=k, contiguous=True)
    part.to_parquet(os.path.join(folder, f"{split}-{k:05d}-of-{files:05d}.parquet"))


def write_text(root, splits: dict, *, text_key: str = "text", files: int = 1, subset=None) -> str:
  """{split: documents} as a hub-layout folder (data/SPLIT-K-of-N.parquet, or SUBSET/... with a
  README.md naming the subset), each document with an `id` column beside its text."""
  lib = datasets_library()
  folder = os.path.join(str(root), subset or "data")
  for split, documents in splits.items():
    rows = lib.Dataset.from_dict({"id": list(range(len(documents))), text_key: list(documents)})
    write_split(rows, folder, split, files)
  if subset:
    write_readme(root, subset, splits)
  return str(root)


def write_readme(root, subset: str, splits) -> None:
  """A README.md whose YAML names the files of `subset` (and of those written before it), as a
  hub repo's names its configs."""
  path = os.path.join(str(root), "README.md")
  lines = ["---", "configs:"]
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      lines = f.read().splitlines()[:-1]  # without the closing ---
  lines += [f"- config_name: {subset}", "  data_files:"]
  for split in splits:
    lines += [f"  - split: {split}", f"    path: {subset}/{split}-*.parquet"]
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines + ["---", ""]))


def save_text(root, splits: dict, *, text_key: str = "text") -> str:
  """{split: documents} written by DatasetDict.save_to_disk."""
  lib = datasets_library()
  lib.DatasetDict(
      {split: lib.Dataset.from_dict({text_key: list(docs)}) for split, docs in splits.items()}
  ).save_to_disk(str(root))
  return str(root)


def image_features(class_names, image_key="image", label_key="label"):
  lib = datasets_library()
  return lib.Features({image_key: lib.Image(), label_key: lib.ClassLabel(names=list(class_names))})


def write_images(
    root, splits: dict, class_names, *, image_key="image", label_key="label", files: int = 1
) -> str:
  """{split: [(encoded image, class name)]} as a hub-layout folder: data/SPLIT-K-of-N.parquet
  with an Image and a ClassLabel column."""
  lib = datasets_library()
  label_of = {name: i for i, name in enumerate(class_names)}
  features = image_features(class_names, image_key, label_key)
  for split, examples in splits.items():
    rows = lib.Dataset.from_dict(
        {
            image_key: [{"bytes": encoded, "path": None} for encoded, _ in examples],
            label_key: [label_of[name] for _, name in examples],
        },
        features=features,
    )
    write_split(rows, os.path.join(str(root), "data"), split, files)
  return str(root)


def write_folder(root, splits: dict) -> str:
  """The same {split: [(encoded image, class name)]} as a folder: dataset, root/SPLIT/CLASS/*.jpg,
  named so that the folder's order (class, then file name) is the list's."""
  for split, examples in splits.items():
    for i, (encoded, name) in enumerate(examples):
      os.makedirs(os.path.join(str(root), split, name), exist_ok=True)
      with open(os.path.join(str(root), split, name, f"{i:05d}.jpg"), "wb") as f:
        f.write(encoded)
  return str(root)


def jpeg(image_HxWx3: np.ndarray) -> bytes:
  from PIL import Image  # pylint: disable=g-import-not-at-top

  out = io.BytesIO()
  Image.fromarray(image_HxWx3).save(out, format="JPEG", quality=95)
  return out.getvalue()


def digit_jpegs(test_every: int = 5) -> dict:
  """scikit-learn's 1,797 digits as 32-px JPEGs, {split: [(jpeg, class name)]} sorted by class
  (a folder's order), every `test_every`-th of each class in "test"."""
  from sklearn import datasets as sk_datasets  # pylint: disable=g-import-not-at-top

  digits = sk_datasets.load_digits()
  splits = {"train": [], "test": []}
  for label in range(10):
    for rank, i in enumerate(np.flatnonzero(digits.target == label)):
      gray_8x8 = np.round(digits.images[i] * (255.0 / 16.0)).astype(np.uint8)
      gray_32x32 = np.kron(gray_8x8, np.ones((4, 4), np.uint8))
      image = jpeg(np.repeat(gray_32x32[:, :, None], 3, axis=2))
      split = "test" if rank % test_every == test_every - 1 else "train"
      splits[split].append((image, f"digit{label}"))
  return splits


def shapes_jpegs(count: int, size: int = 16, seed: int = 0) -> list:
  """`count` small JPEGs of two classes ("dark", "light"): enough for a pipeline, not a model."""
  rng = np.random.default_rng(seed)
  examples = []
  for i in range(count):
    name = ("dark", "light")[i % 2]
    base = 60 if name == "dark" else 190
    image = np.clip(rng.normal(base, 20, (size, size, 3)), 0, 255).astype(np.uint8)
    examples.append((jpeg(image), name))
  return examples


def stand_in(config, tmp_path) -> None:
  """For a documented command naming an hf: dataset: a small one like it at a local path, and
  `config.dataset` naming it (what tfds.testing.mock_data does for TFDS names). A hub name
  becomes tmp_path/hub/ORG/NAME; a local folder tmp_path/FOLDER. Text: the embedded corpus's
  documents in the config's text column (and subset), train only where the config holds out a
  validation split, or tests/data/text/en_es.py's pairs where it names a source and a target key
  (in a translation column where both look like language codes); images: two classes in the
  config's image and label columns."""
  name = config.dataset[len(data.HUB_PREFIX) :]
  local = os.path.join(str(tmp_path), "hub" if not name.startswith("/") else "", name.lstrip("/"))
  config.dataset = data.HUB_PREFIX + local
  if os.path.exists(local):
    return
  if config.get("source_key"):  # pairs: the parallel corpus, as its layout's keys name it
    from tests.data.text import en_es  # pylint: disable=g-import-not-at-top

    keys = (config.source_key, config.target_key)
    translation = all(len(key) <= 3 for key in keys)  # language codes: a translation column
    en_es.write_hub(local, keys=keys, translation=translation, subset=config.hf_subset)
    return
  splits = ("train",) if config.get("hf_holdout") else ("train", "validation")
  if "image_key" in config:
    examples = shapes_jpegs(64)
    splits = dict(zip(splits + ("test",), (examples, examples[:16], examples[16:32])))
    write_images(local, splits, ("dark", "light"), image_key=config.image_key,
                 label_key=config.label_key)  # fmt: skip
    return
  documents = corpus.split_documents("train")
  texts = {split: documents[i::2] for i, split in enumerate(splits)}
  write_text(local, texts, text_key=config.text_key, subset=config.hf_subset)
