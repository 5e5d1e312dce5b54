"""Checks of an image data config before training: the dataset opens, both splits read."""

from vit_jax import data
from vit_jax import errors
from vit_jax.data.image import sources


def check_config(config) -> dict:
  """The image dataset `config.dataset` opens and both splits read; returns notes for the metrics
  log (the count of undecodable folder images skipped)."""
  source = sources.open_source(config.dataset, data_dir=config.data_dir, download=config.download)
  for key in data.SPLIT_KEYS:
    _check_split(source, config.dataset, key, config[key] or getattr(source, key))
  if source.classes_in is not None and not config.get("allow_class_mismatch"):
    _check_classes_agree(config, source)
  if not config.dataset.startswith(sources.FOLDER_PREFIX):
    return {}
  from vit_jax.data.image import folder  # pylint: disable=g-import-not-at-top  (folders only)

  bad = folder.undecodable_images(source.name[len(sources.FOLDER_PREFIX) :])
  if bad and config.get("bad_images") == "error":
    raise errors.DataError(
        f"{bad[0]} is not a decodable image ({len(bad)} such file(s) in the "
        "folder); remove or re-encode it, or set --config.bad_images=skip."
    )
  return {"skipped_images": len(bad)} if bad else {}


def check_split(config, dataset: str, split: str | None, *, key: str) -> int:
  """`split` of `dataset` (its default eval split when None) exists and holds examples, read
  with the run's data_dir; returns the dataset's class count. `key` is the config key that names
  the split (`--config.<key>`), for the error message."""
  source = sources.open_source(dataset, data_dir=config.data_dir, download=config.download)
  _check_split(source, dataset, key, split or source.eval_split)
  return source.num_classes


def _check_split(source, dataset: str, key: str, split: str | None):
  if split is None:
    raise errors.ConfigError(f"--config.{key} is unset and {dataset!r} has no default one; set it.")
  source.check_split(key, split)  # names the splits there are, with sizes
  try:  # and reading it: a folder's splits, or a TFDS split under mock_data
    ds = source.read(split, 0, 1)
  except errors.UserError:
    raise
  except (ValueError, KeyError) as e:  # TFDS's way of saying the split does not exist
    raise errors.DataError(
        f"--config.{key}={split!r} is not a split of {dataset!r} "
        f"({str(e).splitlines()[0][:200]}); choose an existing split."
    ) from e
  if int(ds.cardinality()) == 0:
    raise errors.DataError(f"--config.{key}={split!r} of {dataset!r} is empty.")


def _check_classes_agree(config, source) -> None:
  """The train and eval splits must hold the same classes: a class only in the eval split is
  one the model never learns, and one only in training is never scored."""
  chosen = {key: config[key] or getattr(source, key) for key in data.SPLIT_KEYS}
  classes = {key: set(source.classes_in(split)) for key, split in chosen.items()}
  train, evaluated = classes["train_split"], classes["eval_split"]
  if train == evaluated:
    return
  parts = []
  for key, other in (("eval_split", "train_split"), ("train_split", "eval_split")):
    only = sorted(classes[key] - classes[other])
    if only:
      parts.append(f"{chosen[key]!r} has {', '.join(only)}, which {chosen[other]!r} lacks")
  raise errors.DataError(
      f"the classes of --config.train_split={chosen['train_split']!r} and "
      f"--config.eval_split={chosen['eval_split']!r} of {config.dataset} differ: "
      f"{'; '.join(parts)}. Give both splits the same class folders, or set "
      "--config.allow_class_mismatch=true to train and score them as they are."
  )
