"""The lm-evaluation-harness adapter: its three requests and the harness's own metrics on small
tasks defined from a local JSONL file equal what we compute by hand from the model's own
log-probabilities. Needs `lm-eval` (the test extras); offline."""

import json
import math
import os
import re

import jax
import numpy as np
import pytest

from tests import tiny_configs as configs
from vit_jax import interop
from vit_jax.models import sampling
from vit_jax.training import train

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # the tasks read a local file only
lm_eval = pytest.importorskip("lm_eval")
lm_eval_tasks = pytest.importorskip("lm_eval.tasks")
lm_eval_instance = pytest.importorskip("lm_eval.api.instance")

DOCS = [
    {"context": "The module", "choices": [" is", " the", " xyz"], "label": 0},
    {"context": "def ", "choices": ["function", "qqqq"], "label": 0},
    {"context": "", "choices": ["import", "zzzz"], "label": 1},
    {"context": "Return the", "choices": [" value", " of", "\n"], "label": 2},
]


@pytest.fixture(scope="module")
def gpt_workdir(tmp_path_factory):
  """A 1-layer char-level GPT trained 30 steps on the embedded corpus (context 32)."""
  config = configs.load("gpt", "runlocal")
  config.model.update(width=32, depth=1, num_heads=2)
  config.seq_len, config.batch_size, config.total_steps = 32, 16, 30
  config.eval_every = config.checkpoint_every = 30
  workdir = str(tmp_path_factory.mktemp("harness") / "gpt")
  train.train_and_evaluate(config, workdir)
  return workdir


@pytest.fixture(scope="module")
def lm(gpt_workdir):
  from vit_jax.evaluate import lm_eval_adapter  # pylint: disable=g-import-not-at-top  (registers it)

  del lm_eval_adapter
  return lm_eval.api.registry.get_model("vit_jax").create_from_arg_string(
      f"workdir={gpt_workdir},batch_size=3"
  )


@pytest.fixture(scope="module")
def by_hand(gpt_workdir):
  """log p(continuation ids | context ids) and greedy-ness from one forward pass of the row.

  The row is padded at its end to the model's context (one compiled shape): a causal model's
  logits at a position never see later tokens (tests/models/test_properties.py)."""
  ckpt = interop.load(gpt_workdir)
  module, params = ckpt.module(), ckpt.tree()
  context = module.max_len
  log_probs = jax.jit(
      lambda row_1xL: jax.nn.log_softmax(
          module.apply({"params": params}, row_1xL).astype(np.float32), -1
      )
  )

  def score(context_ids, continuation_ids):
    row = np.asarray(context_ids + continuation_ids, np.int32)
    assert len(row) - 1 <= context
    inputs = np.zeros((1, context), np.int32)
    inputs[0, : len(row) - 1] = row[:-1]
    logp = np.asarray(log_probs(inputs))[0]
    positions = range(len(row) - 1 - len(continuation_ids), len(row) - 1)
    total = sum(float(logp[p, row[p + 1]]) for p in positions)
    return total, all(np.argmax(logp[p]) == row[p + 1] for p in positions)

  return score


def request(kind, *args):
  return lm_eval_instance.Instance(kind, doc={}, arguments=args, idx=0)


def test_loglikelihood_is_our_models_by_hand(lm, by_hand):
  pairs = [(d["context"], c) for d in DOCS for c in d["choices"]]
  got = lm.loglikelihood([request("loglikelihood", *pair) for pair in pairs])
  for (context, continuation), (logprob, greedy) in zip(pairs, got):
    context_ids = lm.encode(context) if context else [lm.eos_id]  # an empty context is EOS
    want, want_greedy = by_hand(context_ids, lm.encode(continuation))
    assert logprob == pytest.approx(want, abs=1e-4) and greedy == want_greedy, (
        context,
        continuation,
    )


def test_rolling_loglikelihood_scores_every_token_once(lm, by_hand):
  text = "Return the value of the attribute named by the string; a default is returned."
  ids, window = lm.encode(text), lm.max_length
  assert len(ids) > 2 * window  # three windows of 32 tokens
  (total,) = lm.loglikelihood_rolling([request("loglikelihood_rolling", text)])
  want = 0.0
  for i in range(len(ids)):
    if i < window:  # the first window: EOS, then the text
      context = [lm.eos_id] + ids[:i]
    else:  # window w predicts tokens [w * 32, (w + 1) * 32) from the 32 tokens before its end
      end = min((i // window + 1) * window, len(ids))
      context = ids[end - window - 1 : i]
    want += by_hand(context, [ids[i]])[0]
  assert total == pytest.approx(want, abs=1e-3)


def test_generate_until_is_greedy_decoding_cut_at_the_stop_string(lm, gpt_workdir):
  gen_kwargs = {"until": ["\n"], "max_gen_toks": 12}
  (text,) = lm.generate_until([request("generate_until", "The module", gen_kwargs)])
  ckpt = interop.load(gpt_workdir)
  (new_ids,) = sampling.generate(
      ckpt.model,
      ckpt.tree(),
      [lm.encode("The module")],
      max_new_tokens=12,
      eos_id=lm.tokenizer.eos_id,
  )
  assert text == ckpt.tokenizer.decode(new_ids).split("\n")[0]


def write_tasks(directory, data_file):
  """Three tasks on one JSONL file: multiple choice, perplexity and generation."""
  common = {
      "dataset_path": "json",
      "dataset_kwargs": {"data_files": {"test": str(data_file)}},
      "test_split": "test",
  }
  tasks = {
      "vj_choice": {
          "output_type": "multiple_choice",
          "doc_to_text": "{{context}}",
          "doc_to_choice": "{{choices}}",
          "doc_to_target": "{{label}}",
          "target_delimiter": "",
          "metric_list": [{"metric": "acc"}],
      },
      "vj_perplexity": {  # the harness scores doc_to_target's text
          "output_type": "loglikelihood_rolling",
          "doc_to_text": "",
          "doc_to_target": "{{context}}{{choices[label]}}",
          "metric_list": [{"metric": "word_perplexity"}],
      },
  }
  for name, spec in tasks.items():
    with open(directory / f"{name}.yaml", "w", encoding="utf-8") as f:
      json.dump({"task": name, **common, **spec}, f)  # JSON is YAML
  return list(tasks)


def test_the_harness_scores_a_local_task_as_we_do_by_hand(lm, by_hand, tmp_path):
  data_file = tmp_path / "docs.jsonl"
  data_file.write_text("".join(json.dumps(d) + "\n" for d in DOCS), encoding="utf-8")
  names = write_tasks(tmp_path, data_file)
  manager = lm_eval_tasks.TaskManager(include_path=str(tmp_path))
  results = lm_eval.simple_evaluate(model=lm, tasks=names, task_manager=manager)["results"]

  hits = []
  for doc in DOCS:
    context_ids = lm.encode(doc["context"]) if doc["context"] else [lm.eos_id]
    scores = [by_hand(context_ids, lm.encode(c))[0] for c in doc["choices"]]
    hits.append(int(np.argmax(scores)) == doc["label"])
  assert results["vj_choice"]["acc,none"] == pytest.approx(np.mean(hits))

  logprob, words = 0.0, 0
  for doc in DOCS:
    text = doc["context"] + doc["choices"][doc["label"]]
    logprob += by_hand([lm.eos_id], lm.encode(text))[0]  # each shorter than the context
    words += len(re.split(r"\s+", text))  # the harness's word count
  want = math.exp(-logprob / words)
  assert results["vj_perplexity"]["word_perplexity,none"] == pytest.approx(want, rel=1e-4)


def test_the_model_is_registered_under_its_name():
  from vit_jax.evaluate import lm_eval_adapter  # pylint: disable=g-import-not-at-top

  assert lm_eval.api.registry.get_model("vit_jax") is lm_eval_adapter.VitJaxLM
