"""Text models: token-by-token attention plots (GPT's causal) and [MASK] fill-in, on tiny models
with a character tokenizer laid out as in a workdir."""

import json
import os

import jax
import numpy as np

from vit_jax import models
from vit_jax.analysis import loading
from vit_jax.analysis import predicting
from vit_jax.analysis import report
from vit_jax.data import tokenizers


def _loaded(tmp_path, config, task):
  workdir = tmp_path / config["name"]
  tokenizer = tokenizers.build_tokenizer("char", ["the cat sat on the mat"])
  tokenizer.save(str(workdir / "tokenizer"))
  config = dict(config, vocab_size=tokenizer.vocab_size, max_len=32)
  module = models.build_model(config)
  params = module.init(jax.random.PRNGKey(0), np.zeros((1, 4), np.int32))["params"]
  return loading.Loaded(
      path=str(workdir),
      model=config,
      module=module,
      params=params,
      flat={},
      workdir_config={"task": task},
      notes=[],
  )


def test_gpt_text_attention_is_lower_triangular_and_written(tmp_path):
  loaded = _loaded(tmp_path, dict(name="gpt", variant="pico"), "causal_lm")
  summary, writers = report.visualize_text(loaded, "the cat", heads=[1])
  matrix_TxT = np.array(summary["attention"])[-1, 0]
  assert summary["tokens"] == list("the cat") and matrix_TxT.shape == (7, 7)
  np.testing.assert_array_equal(np.triu(matrix_TxT, k=1), 0.0)
  written = report.write(str(tmp_path / "out"), summary, writers)
  assert sorted(os.path.basename(p) for p in written) == ["summary.json", "text_attention.png"]
  assert json.loads((tmp_path / "out" / "summary.json").read_text())["heads"] == [1]


def test_bert_fills_each_mask(tmp_path):
  loaded = _loaded(tmp_path, dict(name="bert_mlm", variant="tiny"), "masked_lm")
  result = predicting.fill_masks(loaded, "the [MASK]at s[MASK]t", top_k=3)
  # [CLS] t h e ' ' [MASK] ...: the masks sit at tokens 5 and 10.
  assert [m["position"] for m in result["masks"]] == [5, 10]
  probabilities = [t["probability"] for t in result["masks"][0]["top_k"]]
  assert len(probabilities) == 3 and probabilities == sorted(probabilities, reverse=True)
