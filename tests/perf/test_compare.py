"""The side-by-side benchmark runs end to end at tiny sizes and writes its table and JSON."""

import json
import subprocess
import sys

import pytest

from tests.training import helpers

pytest.importorskip("timm")
pytest.importorskip("transformers")


@pytest.mark.slow
def test_quick_compare_prints_table_and_json(tmp_path):
  out = tmp_path / "results.json"
  done = subprocess.run(
      [
          sys.executable,
          "-m",
          "benchmarks.compare",
          "--quick",
          "--only",
          "vit_ti16_train",
          "gpt_decode_b1",
          "input_pipeline",
          "--json",
          str(out),
      ],
      env=helpers.env(),
      cwd=helpers.ROOT,
      capture_output=True,
      text=True,
      timeout=900,
  )
  assert done.returncode == 0, done.stderr[-3000:]
  assert "vit_ti16_train" in done.stdout and "input_pipeline" in done.stdout
  rows = {r["workload"]: r for r in json.loads(out.read_text())["results"]}
  assert set(rows) == {"vit_ti16_train", "gpt_decode_b1", "input_pipeline"}
  assert all(r["ours"] > 0 and r["peer"] > 0 for r in rows.values())
