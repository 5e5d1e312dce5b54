"""predict agrees with the trainer's evaluation; both command lines write their files and exit 0;
bad input is one clear line and exit code 2."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from tests.helpers import ROOT
from vit_jax import interop
from vit_jax import models
from vit_jax.analysis import loading
from vit_jax.analysis import predicting

pytestmark = pytest.mark.slow


def run_cli(module, *args):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
  return subprocess.run(
      [sys.executable, "-m", module, *args],
      env=env,
      capture_output=True,
      text=True,
      timeout=600,
      cwd=ROOT,
  )


def test_predict_agrees_with_the_trainers_eval_accuracy(digits_workdir, digits_test_folder):
  workdir, eval_accuracy = digits_workdir
  results = predicting.classify_images(loading.load(workdir), [digits_test_folder], top_k=3)
  assert len(results) == 355
  truth = [int(os.path.basename(os.path.dirname(r["file"]))) for r in results]
  correct = [r["top_k"][0]["label"] == t for r, t in zip(results, truth)]
  assert all(r["top_k"][0]["name"] == str(r["top_k"][0]["label"]) for r in results)  # digit names
  assert eval_accuracy > 0.25  # learned something, so agreement is not a coincidence of chance
  assert abs(np.mean(correct) - eval_accuracy) <= 1 / 355 + 1e-9, (np.mean(correct), eval_accuracy)


def test_visualize_and_predict_write_their_files(digits_workdir, digits_test_folder, tmp_path):
  workdir, _ = digits_workdir
  images = [
      os.path.join(
          digits_test_folder, "3", sorted(os.listdir(os.path.join(digits_test_folder, "3")))[0]
      ),
      os.path.join(digits_test_folder, "7"),
  ]
  out = tmp_path / "visualize"
  done = run_cli(
      "vit_jax.visualize",
      f"--checkpoint={workdir}",
      f"--image={images[0]}",
      f"--output_dir={out}",
      "--layers=0,1",
      "--heads=0,2",
  )
  assert done.returncode == 0, done.stderr
  names = set(os.listdir(out))
  assert {
      "rollout.png",
      "attention_distance.png",
      "position_similarity.png",
      "filters_pca.png",
      "summary.json",
  } <= names and any(n.startswith("attention_00") for n in names)
  summary = json.loads((out / "summary.json").read_text())
  assert np.array(summary["attention_distance"]["per_layer_per_head"]).shape == (2, 4)
  assert np.array(summary["position_similarity"]["matrix"]).shape == (16, 16)

  output = tmp_path / "predictions.json"
  done = run_cli(
      "vit_jax.predict",
      f"--checkpoint={workdir}",
      f"--image={images[1]}",
      f"--output={output}",
      "--top_k=2",
  )
  assert done.returncode == 0, done.stderr
  results = json.loads(output.read_text())
  assert len(results) == len(os.listdir(images[1])) and len(results[0]["top_k"]) == 2


@pytest.fixture(scope="module")
def gpt_npz(tmp_path_factory):
  """A tiny GPT as an imported .npz: a text model, with no tokenizer."""
  config = dict(name="gpt", vocab_size=16, variant="pico", max_len=16)
  params = models.build_model(config).init(jax.random.PRNGKey(0), np.zeros((1, 4), np.int32))[
      "params"
  ]
  path = str(tmp_path_factory.mktemp("gpt") / "gpt.npz")
  interop.save(interop.from_tree(params, config), path, to="npz")
  return path


@pytest.mark.parametrize("case", ["not_an_image", "no_checkpoint", "layer", "head", "text_model"])
def test_bad_input_is_one_line_and_exit_code_2(
    case, digits_workdir, digits_test_folder, gpt_npz, tmp_path
):
  workdir, _ = digits_workdir
  out = tmp_path / "out"
  not_image = tmp_path / "notes.png"
  not_image.write_text("this is text, not a PNG")
  empty_workdir = tmp_path / "empty"
  empty_workdir.mkdir()
  (empty_workdir / "config.json").write_text(json.dumps({"task": "image_classification"}))
  image = str(not_image) if case == "not_an_image" else os.path.join(ROOT, "README.md")
  args = {
      "not_an_image": ["--checkpoint=" + workdir, f"--image={image}"],
      "no_checkpoint": [f"--checkpoint={empty_workdir}", f"--image={image}"],
      "layer": ["--checkpoint=" + workdir, "--layers=7", f"--image={image}"],
      "head": ["--checkpoint=" + workdir, "--heads=-1", f"--image={image}"],
      "text_model": [f"--checkpoint={gpt_npz}", f"--image={image}"],
  }[case]
  if case in ("layer", "head"):  # a real image, so only the index is wrong
    args[-1] = "--image=" + os.path.join(digits_test_folder, "1")
  expected = {
      "not_an_image": "is not an image",
      "no_checkpoint": "has no checkpoint",
      "layer": "layer [7] out of range",
      "head": "head [-1] out of range",
      "text_model": "is a text model",
  }[case]
  done = run_cli("vit_jax.visualize", *args, f"--output_dir={out}")
  assert done.returncode == 2, done.stderr
  last = done.stderr.strip().splitlines()[-1]
  assert last.startswith("error: ") and expected in last, done.stderr
  assert "Traceback" not in done.stderr
  assert not out.exists()  # nothing written
