"""Bad inputs through the real command lines: exit code 2, one `error:` line naming the problem,
and the workdir or file byte-for-byte unchanged."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests import helpers
from tests.survival import conftest
from vit_jax import convert
from vit_jax import errors
from vit_jax.config import checks
from vit_jax.data.image import folder


def run_module(module, *args):
  return subprocess.run(
      [sys.executable, "-m", module, *args],
      env=helpers.env(),
      capture_output=True,
      text=True,
      timeout=300,
      cwd=helpers.ROOT,
  )


def test_missing_config_file_creates_nothing(tmp_path):
  result = run_module("vit_jax.main", "--config=configs/nope.py", f"--workdir={tmp_path / 'w'}")
  assert result.returncode == 2
  conftest.assert_one_line_error(result.stderr, "configs/nope.py")
  assert not (tmp_path / "w").exists()


def test_unknown_config_argument_has_no_traceback(tmp_path):
  result = run_module(
      "vit_jax.main", f"--config={helpers.VIT_CONFIG}:foo=1", f"--workdir={tmp_path / 'w'}"
  )
  assert result.returncode == 2
  conftest.assert_one_line_error(result.stderr, "'foo'")


# A config file is user code: what goes wrong in it is the user's error, named by file and line.
BROKEN_CONFIGS = {
    "syntax": ("def get_config(:\n  pass\n", 1, "SyntaxError"),
    "raises": (
        "import ml_collections\n\n\ndef get_config():\n"
        "  raise RuntimeError('no such recipe yet')\n",
        5,
        "RuntimeError: no such recipe yet",
    ),
    "import": ("import vit_jax.no_such_module\n", 1, "ModuleNotFoundError"),
    "type": ("def get_config():\n  return 1 + 'a'\n", 2, "TypeError"),
}


@pytest.mark.parametrize("case", sorted(BROKEN_CONFIGS))
@pytest.mark.parametrize("module", ["vit_jax.main", "vit_jax.compile"])
def test_an_error_inside_a_config_file_names_its_line(tmp_path, module, case):
  source, line, named = BROKEN_CONFIGS[case]
  config = tmp_path / "broken.py"
  config.write_text(source)
  workdir = ["--workdir", str(tmp_path / "w")] if module == "vit_jax.main" else []
  result = run_module(module, f"--config={config}", *workdir)
  assert result.returncode == 2, result.stderr[-2000:]
  conftest.assert_one_line_error(result.stderr, f"broken.py, line {line}: {named}")
  assert not (tmp_path / "w").exists()


def test_a_broken_sweep_file_names_its_line(tmp_path):
  sweep = tmp_path / "sweep.py"
  sweep.write_text("def get_sweep():\n  return dict(config=undefined_name)\n")
  result = run_module("vit_jax.sweep", "run", str(sweep), f"--root={tmp_path / 'root'}")
  assert result.returncode == 2, result.stderr[-2000:]
  conftest.assert_one_line_error(result.stderr, "sweep.py, line 2: NameError")
  assert not (tmp_path / "root").exists()


# The other flag values are checked in-process by test_validation.py.
@pytest.mark.parametrize("flag", ["--bogus=1", "--temperature=-1"])
def test_bad_generate_flag(tmp_path, flag):
  result = run_module("vit_jax.generate", f"--workdir={tmp_path}", "--prompt=hi", flag)
  assert result.returncode == 2
  conftest.assert_one_line_error(result.stderr, flag.split("=")[0].lstrip("-"))


@pytest.mark.parametrize(
    "split,named",
    [("train[:5000]", "incompatible with 1442 examples"), ("train[:150%]", "[-100, 100]")],
)
def test_a_training_subset_larger_than_its_split_is_refused(tmp_path, digits_dir, split, named):
  result = helpers.run(
      conftest.tiny_command(tmp_path / "w", digits_dir, f"--config.train_split={split}")
  )
  assert result.returncode == 2, result.stderr[-3000:]
  conftest.assert_one_line_error(result.stderr, f"--config.train_split={split!r}", named)
  assert "train (1442 examples)" in result.stderr  # the split's size, to pick a slice that fits
  assert not (tmp_path / "w").exists()


def test_bad_override_on_a_finished_workdir_changes_nothing(trained, digits_dir):
  before = conftest.snapshot(trained)
  result = helpers.run(conftest.tiny_command(trained, digits_dir, "--config.batch_size=-8"))
  assert result.returncode == 2
  conftest.assert_one_line_error(result.stderr, "batch_size")
  assert conftest.snapshot(trained) == before


# The other values in-process (the trainer validates first; the CLI's part is checked above).
@pytest.mark.parametrize("key,value", [("keep_checkpoints", 0), ("eval_split", "nope")])
def test_bad_value_on_a_finished_workdir_changes_nothing(trained, digits_dir, key, value):
  from vit_jax.training import train  # pylint: disable=g-import-not-at-top

  before = conftest.snapshot(trained)
  with pytest.raises(errors.UserError, match=f"--config.{key}="):
    train.train_and_evaluate(conftest.tiny_config(digits_dir, **{key: value}), str(trained))
  assert conftest.snapshot(trained) == before


@pytest.mark.parametrize("dst", ["same", "inside"])
def test_convert_onto_its_own_workdir_is_refused(trained, dst, capsys):
  before = conftest.snapshot(trained)
  target = trained if dst == "same" else trained / "export"
  assert convert.main([str(trained), str(target), "--to", "orbax", "--overwrite"]) == 2
  conftest.assert_one_line_error(capsys.readouterr().err, "lies inside")
  assert conftest.snapshot(trained) == before


def make_npz(path):
  np.savez(path, **{"head/kernel": np.ones((4, 3), np.float32)})
  return path


@pytest.mark.parametrize("damage", ["truncated", "bit_flip", "text"])
def test_convert_damaged_npz(tmp_path, damage, capsys):
  path = make_npz(tmp_path / "p.npz")
  data = bytearray(path.read_bytes())
  if damage == "truncated":
    data = data[: len(data) // 2]
  elif damage == "bit_flip":
    data[len(data) // 3] ^= 0xFF
  else:
    data = b"just some text, not arrays\n"
  path.write_bytes(bytes(data))
  before = conftest.snapshot(path)
  assert convert.main([str(path), str(tmp_path / "out"), "--to", "hf"]) == 2
  conftest.assert_one_line_error(capsys.readouterr().err, str(path))
  assert conftest.snapshot(path) == before and not (tmp_path / "out").exists()


def test_convert_truncated_safetensors(tmp_path, capsys):
  from safetensors import numpy as safetensors_np  # pylint: disable=g-import-not-at-top

  hf = tmp_path / "hf"
  hf.mkdir()
  (hf / "config.json").write_text('{"model_type": "gpt2"}')
  weights = hf / "model.safetensors"
  safetensors_np.save_file({"wte.weight": np.ones((8, 4), np.float32)}, str(weights))
  weights.write_bytes(weights.read_bytes()[:-7])
  assert convert.main([str(hf), str(tmp_path / "out.npz"), "--to", "npz"]) == 2
  conftest.assert_one_line_error(capsys.readouterr().err, "model.safetensors")


def image_folder(tmp_path, corrupt: bytes):
  """train/ and val/ (no test/), classes a and b, and one file in train/a that does not decode."""
  for split in ("train", "val"):
    for label in ("a", "b"):
      d = tmp_path / "imgs" / split / label
      d.mkdir(parents=True)
      for i in range(3):
        png = tf.io.encode_png(tf.fill([8, 8, 3], tf.constant(40 * i, tf.uint8))).numpy()
        (d / f"{i}.png").write_bytes(png)
  bad = tmp_path / "imgs" / "train" / "a" / "broken.png"
  bad.write_bytes(corrupt)
  return tmp_path / "imgs", bad


@pytest.mark.parametrize("corrupt", [b"", b"\x89PNG\r\n\x1a\n garbage"])
def test_corrupt_image_passes_the_checks_undecoded(tmp_path, corrupt):
  """The checks before training decode nothing: the file is listed, and judged when read."""
  from configs import vit as vit_config  # pylint: disable=g-import-not-at-top

  root, bad = image_folder(tmp_path, corrupt)
  opened = folder.ImageFolder.open(str(root))
  assert str(bad) in [p for p, _ in opened.examples["train"]]
  for bad_images in ("skip", "error"):
    config = vit_config.get_config(f"dataset=folder:{root}")
    config.bad_images = bad_images
    checks.validate_training(config, str(tmp_path / "w"))
  assert not (tmp_path / "w").exists()


def test_a_folder_evaluates_its_val_split_and_checks_images_as_it_reads_them(tmp_path, digits_dir):
  """train/ + val/ trains with no eval_split flag; the broken file is skipped with one warning;
  with bad_images=error the resumed run stops at it in one line and keeps what was saved."""
  root, bad = image_folder(tmp_path, b"\x89PNG\r\n\x1a\n garbage")
  workdir = tmp_path / "w"
  # The digits config's few-shot probe asks for 25 examples per class; this folder has 3.
  folder_flags = (f"--config.dataset=folder:{root}", "--config.evals.fewshot.shots=(1,)")
  result = helpers.run(conftest.tiny_command(workdir, digits_dir, *folder_flags))
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stderr.count(f"warning: skipping {bad}: not a decodable image") == 1
  assert any("eval/accuracy" in line for line in helpers.read_metrics(workdir))
  saved = conftest.snapshot(workdir / "checkpoints")
  more = ("--config.total_steps=12", "--config.bad_images=error")
  result = helpers.run(conftest.tiny_command(workdir, digits_dir, *folder_flags, *more))
  assert result.returncode == 2, result.stderr[-3000:]
  conftest.assert_one_line_error(result.stderr, str(bad), "bad_images=skip")
  assert conftest.snapshot(workdir / "checkpoints") == saved


def test_folder_splits_with_different_classes_are_refused_before_training(tmp_path, digits_dir):
  """test/ has a class train/ lacks: refused up front naming it, unless allowed explicitly."""
  root = tmp_path / "images"
  pixels = np.zeros((8, 8, 3), np.uint8)
  for split, classes in (("train", ("cat", "dog")), ("test", ("bird", "cat", "dog"))):
    for name in classes:
      os.makedirs(root / split / name)
      tf.io.write_file(str(root / split / name / "a.png"), tf.io.encode_png(pixels))
  workdir = tmp_path / "w"
  dataset = f"--config.dataset=folder:{root}"
  result = helpers.run(conftest.tiny_command(workdir, digits_dir, dataset))
  assert result.returncode == 2, result.stderr[-3000:]
  conftest.assert_one_line_error(result.stderr, "'test' has bird", "allow_class_mismatch")
  assert not workdir.exists()
  config = conftest.tiny_config(digits_dir, dataset=f"folder:{root}", allow_class_mismatch=True)
  checks.validate_config(config)
  checks.validate_training(config, str(tmp_path / "w2"))  # allowed: no error
