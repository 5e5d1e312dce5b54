"""The split keys of a data config, and the check that a TFDS split exists and holds examples."""

from vit_jax import errors

SPLIT_KEYS = ("train_split", "eval_split")


def check_tfds_split(builder, key: str, value: str, dataset: str, renamed=()) -> None:
  """`--config.<key>=value` names an existing, non-empty split of `builder`, by the split counts
  TFDS recorded when it prepared the data; TFDS parses slices and sums (`train[:10%]`,
  `train+test`). `renamed`: (name, TFDS split) pairs a reader maps, e.g. ("validation", "test").

  A builder with no recorded splits (`tfds.testing.mock_data` without metadata files accepts
  any) is left to the reader.
  """
  splits = builder.info.splits
  if not splits:
    return
  renamed = {name: split for name, split in renamed if name != split}
  tfds_split = renamed.get(value, value)
  shown = repr(value) if tfds_split == value else f"{value!r} (TFDS split {tfds_split!r})"
  available = ", ".join(
      [f"{name} ({info.num_examples} examples)" for name, info in splits.items()]
      + [f"{name} (= {split})" for name, split in renamed.items()]
  )
  try:
    count = splits[tfds_split].num_examples
  except (KeyError, ValueError) as e:  # TFDS's way of saying it is no such split or slice
    reason = str(e).strip("'\"").splitlines()[0][:200]
    reason = "" if reason.startswith("Unknown split") else f" ({reason})"  # listed below
    raise errors.DataError(
        f"--config.{key}={shown} is not a split of {dataset!r}{reason}; available: "
        f"{available}, or slices of them such as train[:10%]."
    ) from None
  if count == 0:
    raise errors.DataError(
        f"--config.{key}={shown} of {dataset!r} has no examples; available: {available}."
    )
