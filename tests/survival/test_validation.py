"""Config and data validation, called directly: no model is built or compiled."""

import json
import os

import pytest
import tensorflow_datasets as tfds

from configs import gpt as gpt_config
from configs import seq2seq as seq2seq_config
from configs import vit as vit_config
from vit_jax import errors
from vit_jax import workdir as workdir_lib
from vit_jax.config import checks
from vit_jax.data import tfds_builders


def config_with(module, arg="", **overrides):
  c = module.get_config(arg)
  for key, value in overrides.items():
    *parents, last = key.split("__")
    node = c
    for p in parents:
      node = node[p]
    node[last] = value
  return c


@pytest.mark.parametrize(
    "key,value,named",
    [
        ("keep_checkpoints", 0, "keep_checkpoints"),
        ("batch_size", 0, "batch_size"),
        ("batch_size", -8, "batch_size"),
        ("total_steps", -1, "total_steps"),
        ("checkpoint_every", 0, "checkpoint_every"),
        ("log_every", 0, "log_every"),
        ("eval_every", 0, "eval_every"),
        ("grad_accum_steps", 0, "grad_accum_steps"),
        ("grad_accum_steps", 3, "grad_accum_steps"),  # 128 is not divisible by 3
        ("nonfinite", "bogus", "nonfinite"),
        ("progress", "fancy", "progress"),
        ("optimizer__lr", -1.0, "optimizer.lr"),
        ("optimizer__lr", float("nan"), "optimizer.lr"),
        ("optimizer__name", "adam", "optimizer.name"),
        ("optimizer__b2", 1.0, "optimizer.b2"),
        ("bad_images", "ignore", "bad_images"),
        # float16 without loss scaling: its gradients underflow
        ("model__dtype", "float16", "model.dtype='float16' must be float32 or bfloat16: float16"),
        ("model__param_dtype", "float16", "model.param_dtype='float16' must be float32 or"),
        ("storage_outage_s", 0.0, "storage_outage_s"),
        # longer than a bucket workdir's lock is safe from a takeover
        ("storage_outage_s", 600.0, r"storage_outage_s=600.0 must be in \(0, 420\]: a bucket"),
    ],
)
def test_bad_config_value_is_named(key, value, named):
  with pytest.raises(errors.ConfigError, match=named.replace(".", r"\.")):
    checks.validate_config(config_with(vit_config, **{key: value}))


def test_presets_validate():
  for module, arg in [(vit_config, ""), (vit_config, "dataset=cifar10"), (gpt_config, "")]:
    checks.validate_config(module.get_config(arg))
  checks.validate_config(config_with(vit_config, total_steps=0))  # 0: export step 0


def test_config_error_is_a_user_error_but_a_bare_value_error_is_not():
  assert issubclass(errors.ConfigError, errors.UserError)
  assert not issubclass(ValueError, errors.USER_ERRORS)
  assert not isinstance(KeyError("x"), errors.USER_ERRORS)


@pytest.mark.parametrize(
    "flag,value",
    [
        ("max_new_tokens", -1),
        ("temperature", -0.5),
        ("beam_size", 0),
        ("top_k", -1),
        ("top_p", 0.0),
    ],
)
def test_bad_generation_flag_is_named(flag, value):
  args = dict(max_new_tokens=10, temperature=0.8, top_k=0, top_p=1.0, beam_size=1)
  args[flag] = value
  with pytest.raises(errors.ConfigError, match=f"--{flag}"):
    checks.validate_generation(**args)


def write(path, data: bytes):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_bytes(data)
  return path


@pytest.mark.parametrize(
    "case", ["folder", "latin1", "binary", "few_documents", "eval_split", "no_match"]
)
def test_bad_text_data_is_named(tmp_path, case):
  texts = tmp_path / "texts"
  for i in range(25):
    write(texts / f"doc{i:02d}.txt", f"document number {i}\n".encode())
  pattern, named, overrides = str(texts / "*.txt"), None, {}
  if case == "folder":
    (texts / "sub.txt").mkdir()
    named = "sub.txt"
  elif case == "latin1":
    named = str(write(texts / "zz_latin.txt", "caf\xe9 cr\xe8me".encode("latin-1")))
  elif case == "binary":
    named = str(write(texts / "zz_bin.txt", bytes(range(256)).replace(b"\x80", b"")[:32]))
  elif case == "few_documents":
    pattern, named = str(texts / "doc0*.txt"), "10 documents"
  elif case == "eval_split":
    overrides, named = {"eval_split": "valid"}, "eval_split"
  else:
    pattern, named = str(tmp_path / "nothing" / "*.txt"), "no files match"
  config = config_with(gpt_config, dataset=f"files:{pattern}", **overrides)
  with pytest.raises(errors.DataError) as e:
    checks.validate_training(config, str(tmp_path / "w"))
  assert named in str(e.value)
  assert not (tmp_path / "w").exists()


def test_enough_text_documents_pass(tmp_path):
  for i in range(20):
    write(tmp_path / "t" / f"d{i}.txt", "caf\u00e9 ok\n".encode())
  config = config_with(gpt_config, dataset=f"files:{tmp_path / 't' / '*.txt'}")
  checks.validate_training(config, str(tmp_path / "w"))


@pytest.mark.parametrize("total,warmup,warned", [(50, 100, True), (50, 50, True), (51, 50, False)])
def test_a_run_shorter_than_its_warmup_is_warned_once(tmp_path, capsys, total, warmup, warned):
  for i in range(20):
    write(tmp_path / "t" / f"d{i}.txt", b"some text\n")
  config = config_with(gpt_config, dataset=f"files:{tmp_path / 't' / '*.txt'}", total_steps=total)
  config.optimizer.warmup_steps = warmup
  checks.validate_training(config, str(tmp_path / "w"))  # no error: it trains all the same
  err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
  if not warned:
    assert not err
    return
  (line,) = err
  assert f"--config.optimizer.warmup_steps={warmup}" in line
  assert "--config.total_steps=50" in line
  assert "--config.optimizer.warmup_steps=5." in line  # the fix
  config.total_steps = 0  # no training (e.g. to export the initial model): nothing to warn of
  assert not checks.config_warnings(config)


@pytest.fixture
def shakespeare_dir(tmp_path):
  """tiny_shakespeare as prepared by TFDS, metadata only (train 30, validation 1, test 0
  examples), served by tfds.testing.mock_data: split checks read the recorded sizes."""
  data_dir = str(tmp_path / "tfds")
  builder = tfds.builder("tiny_shakespeare", data_dir=data_dir)
  sizes = {"train": 30, "validation": 1, "test": 0}
  builder.info.set_splits(
      tfds.core.SplitDict(
          [
              tfds.core.SplitInfo(name=n, shard_lengths=[k], num_bytes=0, filename_template=None)
              for n, k in sizes.items()
          ]
      )
  )
  os.makedirs(builder.data_dir)
  builder.info.write_to_directory(builder.data_dir)
  with tfds.testing.mock_data(policy=tfds.testing.MockPolicy.USE_FILES, data_dir=data_dir):
    yield data_dir


@pytest.mark.parametrize(
    "key,value,named",
    [
        ("eval_split", "valid", "validation (1 examples)"),  # a typo: the splits there are
        ("train_split", "trian", "train (30 examples)"),
        ("eval_split", "test", "has no examples"),
        ("train_split", "train[40:]", "incompatible with 30 examples"),  # TFDS parses the slice
    ],
)
def test_missing_or_empty_tfds_text_split_is_named(shakespeare_dir, tmp_path, key, value, named):
  from vit_jax.training import train  # pylint: disable=g-import-not-at-top

  # runlocal and one layer: were the check gone, the (mocked) run would end in seconds
  config = config_with(
      gpt_config, "dataset=tiny_shakespeare,runlocal", data_dir=shakespeare_dir, model__depth=1
  )
  config[key] = value
  with pytest.raises(errors.DataError) as e:
    train.train_and_evaluate(config, str(tmp_path / "w"))  # validates before it builds anything
  assert f"--config.{key}={value!r}" in str(e.value) and named in str(e.value)
  assert not (tmp_path / "w").exists()


def test_tfds_text_slices_pass(shakespeare_dir, tmp_path):
  config = config_with(gpt_config, dataset="tiny_shakespeare", data_dir=shakespeare_dir)
  config.train_split, config.eval_split = "train[:10%]", "validation+train[:1]"
  checks.validate_training(config, str(tmp_path / "w"))


def test_lm1b_eval_split_names_its_tfds_split(tmp_path):
  builder = tfds.builder("lm1b", data_dir=str(tmp_path))
  builder.info.set_splits(
      tfds.core.SplitDict(
          [
              tfds.core.SplitInfo(
                  name="train", shard_lengths=[5], num_bytes=0, filename_template=None
              )
          ]
      )
  )
  with pytest.raises(
      errors.DataError, match=r"'validation' \(TFDS split 'test'\).*validation \(= test\)"
  ):
    tfds_builders.check_split(
        builder, "eval_split", "validation", "lm1b", (("validation", "test"),)
    )


@pytest.mark.parametrize(
    "key,value,named",
    [
        ("eval_split", "validation", "test (355 examples)"),
        ("train_split", "train[:0]", "no examples"),
    ],
)
def test_missing_or_empty_tfds_image_split_is_named(digits_dir, tmp_path, key, value, named):
  config = config_with(vit_config, data_dir=digits_dir, **{key: value})
  with pytest.raises(errors.DataError) as e:
    checks.validate_training(config, str(tmp_path / "w"))
  assert f"--config.{key}={value!r}" in str(e.value) and named in str(e.value)
  assert not (tmp_path / "w").exists()


@pytest.mark.parametrize(
    "config_name,dataset,named",
    [
        ("gpt", "embedded", "eval_split"),
        ("seq2seq", "toy_reverse", "eval_split"),
        ("gpt", "nope", "nope"),
    ],
)
def test_generated_text_splits_and_unknown_names(tmp_path, config_name, dataset, named):
  module = {"gpt": gpt_config, "seq2seq": seq2seq_config}[config_name]
  config = config_with(
      module, dataset=dataset, eval_split="all" if dataset == "embedded" else "valid"
  )
  with pytest.raises(errors.UserError, match=named):
    checks.validate_training(config, str(tmp_path / "w"))
  assert not (tmp_path / "w").exists()


def test_text_dataset_of_the_wrong_kind_is_refused_up_front(tmp_path):
  """An encoder-decoder needs pairs; a GPT reads pairs too (the decoder-only design,
  docs/pairs.md), so only the first is a mistake."""
  config = config_with(seq2seq_config, dataset="embedded")
  with pytest.raises(errors.ConfigError, match="holds documents, but pairs"):
    checks.validate_training(config, str(tmp_path / "w"))
  assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("case", ["file", "under_file", "read_only"])
def test_unusable_workdir_is_refused(tmp_path, case, monkeypatch):
  target = tmp_path / "f"
  target.write_text("keep me")
  workdir = {"file": target, "under_file": target / "w", "read_only": tmp_path / "ro" / "w"}[case]
  if case == "read_only":
    (tmp_path / "ro").mkdir(mode=0o500)
    if os.access(tmp_path / "ro", os.W_OK):  # root: permissions are not enforced, so say them
      access = os.access
      monkeypatch.setattr(
          os, "access", lambda p, mode: access(p, mode) and os.stat(p).st_mode & 0o200
      )
  with pytest.raises(errors.WorkdirError, match="--workdir"):
    workdir_lib.check_workdir(str(workdir))
  assert target.read_text() == "keep me"


def test_resume_with_other_data_lists_the_keys(tmp_path):
  workdir = tmp_path / "w"
  workdir.mkdir()
  saved = gpt_config.get_config("")
  (workdir / "config.json").write_text(saved.to_json_best_effort())
  before = (workdir / "config.json").read_text()
  changed = config_with(gpt_config, dataset="tiny_shakespeare")
  with pytest.raises(
      errors.WorkdirError, match="dataset: saved 'stream:embedded', now 'tiny_shakespeare'"
  ):
    workdir_lib.check_resume(changed, str(workdir))
  tokenizer = config_with(gpt_config, tokenizer__kind="byte_bpe", allow_data_change=True)
  with pytest.raises(errors.WorkdirError, match="tokenizer.kind"):
    workdir_lib.check_resume(tokenizer, str(workdir))
  workdir_lib.check_resume(
      config_with(gpt_config, dataset="tiny_shakespeare", allow_data_change=True), str(workdir)
  )
  workdir_lib.check_resume(saved, str(workdir))
  assert (workdir / "config.json").read_text() == before
  assert json.loads(before)["dataset"] == "stream:embedded"


@pytest.mark.parametrize("dst", ["same", "inside", "contains"])
def test_convert_destination_overlapping_source_is_refused(tmp_path, dst):
  src = tmp_path / "src"
  (src / "checkpoints").mkdir(parents=True)
  target = {"same": src, "inside": src / "export", "contains": tmp_path}[dst]
  with pytest.raises(errors.WorkdirError, match="lies inside"):
    workdir_lib.check_convert_paths(str(src), str(target))
  workdir_lib.check_convert_paths(str(src), str(tmp_path / "elsewhere"))
