"""ImageNet as a researcher prepares it (docs/imagenet.md): a miniature in the official tar format
(scripts/imagenet_miniature.py) prepared by `python -m vit_jax.prepare` with TFDS's own builder;
what a run says when it is not prepared; unlabelled splits refused before anything runs. The
whole trip (train, evaluate, predict) runs on the base install in scripts/smoke_base_install.sh.
"""

import os
import subprocess
import sys
import tarfile
import time

import pytest
import tensorflow_datasets as tfds

from tests import helpers

CONFIG = "--config=configs/vit.py:dataset=imagenet2012,runlocal"


def prepare(data_dir, manual_dir, *extra):
  return helpers.run(
      [sys.executable, "-m", "vit_jax.prepare", CONFIG, f"--config.data_dir={data_dir}",
       f"--manual_dir={manual_dir}", "--datasets=imagenet2012", *extra]  # fmt: skip
  )


def train(data_dir, workdir, *overrides):
  overrides = (f"--config.data_dir={data_dir}", "--config.total_steps=1", *overrides)
  return helpers.run(helpers.main_command(workdir, "dataset=imagenet2012,runlocal", *overrides))


@pytest.fixture(scope="module")
def imagenet(tmp_path_factory):
  """(data_dir, manual_dir) of the miniature, prepared with the documented command."""
  root = tmp_path_factory.mktemp("imagenet")
  manual_dir, data_dir = root / "manual", root / "tfds"
  script = os.path.join(helpers.ROOT, "scripts", "imagenet_miniature.py")
  subprocess.run([sys.executable, script, str(manual_dir)], check=True, env=helpers.env())
  result = prepare(data_dir, manual_dir)
  assert result.returncode == 0, result.stderr[-2000:]
  assert "imagenet2012: prepared" in result.stdout
  return data_dir, manual_dir


def test_the_official_tars_prepare_into_tfds_imagenet2012(imagenet):
  data_dir, manual_dir = imagenet
  builder = tfds.builder("imagenet2012", data_dir=str(data_dir))
  counts = {name: info.num_examples for name, info in builder.info.splits.items()}
  with tarfile.open(manual_dir / "ILSVRC2012_img_train.tar") as train_tar:
    classes = len(train_tar.getnames())  # one tar per class
  # the miniature's defaults: 8 images a class, plus the CMYK and the PNG one
  assert counts == {"train": classes * 8 + 2, "validation": 24, "test": 6}
  odd = {"n01739381_1309.JPEG", "n02105855_2933.JPEG"}  # the CMYK one, and the PNG named .JPEG
  found = {}
  for ex in tfds.as_numpy(builder.as_dataset(split="train")):
    if ex["file_name"].decode() in odd:
      found[ex["file_name"].decode()] = ex["image"].shape
  assert found == {name: (48, 48, 3) for name in odd}  # converted to RGB JPEGs
  validation = list(tfds.as_numpy(builder.as_dataset(split="validation", shuffle_files=False)))
  names = builder.info.features["label"].names
  first = min(validation, key=lambda ex: ex["file_name"])
  assert names[first["label"]] == "n01751748"  # TFDS's label of ILSVRC2012_val_00000001
  # A rerun finds it prepared and touches nothing.
  again = prepare(data_dir, manual_dir)
  assert again.returncode == 0 and "imagenet2012: already prepared" in again.stdout


def test_an_unprepared_run_prints_the_command_that_prepares_it(tmp_path):
  empty = tmp_path / "tfds"
  result = train(empty, tmp_path / "w")
  assert result.returncode == 2, result.stderr[-2000:]
  assert "ILSVRC2012_img_train.tar and ILSVRC2012_img_val.tar" in result.stderr
  # the run's own --config flags, after the prepare command
  (command,) = [x.strip() for x in result.stderr.splitlines() if "vit_jax.prepare" in x]
  assert command.startswith("python -m vit_jax.prepare --config=") and "runlocal" in command
  assert f"--config.data_dir={empty}" in command and "tfds build" not in result.stderr
  assert "Traceback" not in result.stderr and not (tmp_path / "w").exists()


def test_preparing_without_the_tars_says_where_they_go(tmp_path):
  result = prepare(tmp_path / "tfds", tmp_path / "no_tars")
  assert result.returncode == 2, result.stderr[-2000:]
  (line,) = [x for x in result.stderr.splitlines() if x.startswith("error:")]
  assert "ILSVRC2012_img_train.tar" in line and str(tmp_path / "no_tars") in line
  assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "override, key",
    [
        ("--config.eval_split=test", "eval_split"),
        ("--config.train_split=test", "train_split"),
        ("--config.evals.minival.split=test", "evals.minival.split"),
    ],
)
def test_an_unlabelled_split_is_refused_before_anything_runs(imagenet, tmp_path, override, key):
  """ImageNet's test split has label -1 throughout: scoring it printed 0.00% and exit 0."""
  data_dir, _ = imagenet
  result = train(data_dir, tmp_path / "w", override)
  assert result.returncode == 2, result.stderr[-2000:]
  (line,) = [x for x in result.stderr.splitlines() if x.startswith("error:")]
  assert f"--config.{key}='test'" in line and "has no labels" in line
  assert not any((tmp_path / "w" / name).exists() for name in ("checkpoints", "metrics.jsonl"))


# No network: every request goes to a proxy that refuses it at once (nothing is downloaded).
NO_NETWORK = {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}


def offline(command):
  return subprocess.run(
      command,
      env={**helpers.env(), **NO_NETWORK},
      capture_output=True,
      text=True,
      timeout=600,
      cwd=helpers.ROOT,
  )


def test_downloading_without_network_skips_an_optional_evaluator_in_one_line(imagenet, tmp_path):
  """The ImageNet recipe's ImageNet-v2 and ReaL evaluators are optional: with
  --config.download=true and no network each is left out with one line, and the run trains."""
  data_dir, _ = imagenet
  overrides = (f"--config.data_dir={data_dir}", "--config.total_steps=1", "--config.download=true")
  started = time.time()
  result = offline(
      helpers.main_command(tmp_path / "w", "dataset=imagenet2012,runlocal", *overrides)
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Traceback" not in result.stderr and "error:" not in result.stderr
  notes = [x for x in result.stdout.splitlines() if x.startswith("note: evaluator")]
  assert len(notes) == 2, result.stdout[-3000:]
  v2, real = sorted(notes, key=lambda x: "'real'" in x)
  assert "'v2' skipped: could not download 'imagenet_v2" in v2 and "https://" in v2
  assert "did not answer in 5 tries" in v2 and "python -m vit_jax.prepare" in v2
  # ReaL's validation images are a manual download, here in another folder than TFDS's default
  assert "'real' skipped: 'imagenet2012_real' needs a manual download" in real
  assert time.time() - started < 300  # a network that does not answer, said within seconds


@pytest.mark.parametrize("module", ["vit_jax.main", "vit_jax.prepare"])
def test_downloading_a_required_dataset_without_network_is_one_line(module, tmp_path):
  empty = tmp_path / "tfds"
  config = f"--config=configs/vit.py:dataset=cifar10,runlocal --config.data_dir={empty}".split()
  if module == "vit_jax.main":
    command = [
        sys.executable,
        "-m",
        module,
        *config,
        "--config.download=true",
        f"--workdir={tmp_path / 'w'}",
    ]
  else:
    command = [sys.executable, "-m", module, *config]
  result = offline(command)
  assert result.returncode == 2, result.stderr[-3000:]
  assert "Traceback" not in result.stderr
  (line,) = [x for x in result.stderr.splitlines() if x.startswith("error:")]
  assert "could not download 'cifar10': https://www.cs.toronto.edu/~kriz/" in line
  assert "did not answer in 5 tries (ConnectionRefusedError" in line
  assert "python -m vit_jax.prepare --config=configs/vit.py:dataset=cifar10,runlocal" in line
  assert not (tmp_path / "w").exists()
