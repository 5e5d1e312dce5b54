"""BERT <-> Hugging Face: same logits both ways (pretraining, MLM, classification, encoder)."""

import numpy as np
import pytest

from tests import peers
from tests.interop import helpers
from vit_jax import interop

torch = peers.require("torch")
transformers = peers.require("transformers")

SIZE = dict(
    vocab_size=99,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=24,
    type_vocab_size=2,
)
OURS = dict(
    vocab_size=99,
    variant="tiny",
    width=32,
    depth=2,
    num_heads=4,
    mlp_dim=64,
    max_len=24,
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
)
# Two sequences of two segments each; the second is padded.
TOKENS = np.array(
    [[2, 17, 33, 45, 3, 60, 71, 8, 9, 3], [2, 55, 12, 3, 40, 41, 3, 0, 0, 0]], np.int32
)
SEGMENTS = np.array([[0] * 5 + [1] * 5, [0] * 4 + [1] * 3 + [0] * 3], np.int32)
MASK = (TOKENS != 0).astype(np.int32)
VALID = MASK.astype(bool)  # positions whose outputs mean something


def hf_outputs(model):
  with torch.no_grad():
    return model(
        input_ids=torch.tensor(TOKENS, dtype=torch.long),
        attention_mask=torch.tensor(MASK, dtype=torch.long),
        token_type_ids=torch.tensor(SEGMENTS, dtype=torch.long),
    )


def our_outputs(ckpt):
  return ckpt.module().apply({"params": ckpt.tree()}, TOKENS, SEGMENTS, MASK)


def save_hf(cls, tmp_path, hidden_act="gelu", **extra):
  torch.manual_seed(0)
  config = transformers.BertConfig(
      **SIZE,
      hidden_act=hidden_act,
      hidden_dropout_prob=0.0,
      attention_probs_dropout_prob=0.0,
      **extra,
  )
  model = helpers.perturb_torch(cls(config))
  model.save_pretrained(tmp_path / "hf")
  return model, str(tmp_path / "hf")


@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_new"])
def test_import_pretraining(tmp_path, hidden_act):
  hf, path = save_hf(transformers.BertForPreTraining, tmp_path, hidden_act)
  ckpt = interop.load(path)
  assert ckpt.model["name"] == "bert" and ckpt.model["norm_eps"] == 1e-12
  assert ckpt.model["activation"] == {"gelu": "gelu", "gelu_new": "gelu_tanh"}[hidden_act]
  ref, ours = hf_outputs(hf), our_outputs(ckpt)
  assert (
      helpers.max_diff(ours["mlm_logits"][VALID], ref.prediction_logits.numpy()[VALID])
      <= helpers.TOL
  )
  assert helpers.max_diff(ours["nsp_logits"], ref.seq_relationship_logits.numpy()) <= helpers.TOL
  # The encoder alone is our `Bert`: same sequence output as HF's BertModel inside.
  from vit_jax.models import Bert  # pylint: disable=g-import-not-at-top

  bert = Bert(**{k: v for k, v in ckpt.model.items() if k not in ("name", "next_sentence")})
  seq, pooled = bert.apply({"params": ckpt.tree()["bert"]}, TOKENS, SEGMENTS, MASK)
  with torch.no_grad():
    base = hf.bert(
        input_ids=torch.tensor(TOKENS, dtype=torch.long),
        attention_mask=torch.tensor(MASK, dtype=torch.long),
        token_type_ids=torch.tensor(SEGMENTS, dtype=torch.long),
    )
  assert helpers.max_diff(seq[VALID], base.last_hidden_state.numpy()[VALID]) <= helpers.TOL
  assert helpers.max_diff(pooled, base.pooler_output.numpy()) <= helpers.TOL


def test_import_masked_lm_and_classifier(tmp_path):
  hf, path = save_hf(transformers.BertForMaskedLM, tmp_path / "mlm")
  ckpt = interop.load(path)
  assert ckpt.model["name"] == "bert_mlm"
  assert any("bert/pooler" in n and "initialized fresh" in n for n in ckpt.notes)  # HF has none
  assert (
      helpers.max_diff(our_outputs(ckpt)["mlm_logits"][VALID], hf_outputs(hf).logits.numpy()[VALID])
      <= helpers.TOL
  )

  hf, path = save_hf(transformers.BertForSequenceClassification, tmp_path / "cls", num_labels=3)
  ckpt = interop.load(path)
  assert ckpt.model["name"] == "bert_classifier" and ckpt.model["num_classes"] == 3
  assert helpers.max_diff(our_outputs(ckpt), hf_outputs(hf).logits.numpy()) <= helpers.TOL


EXPORTS = [
    ({"name": "bert", **OURS}, "BertForPreTraining"),
    ({"name": "bert_mlm", **OURS, "activation": "gelu_tanh"}, "BertForMaskedLM"),
    ({"name": "bert_classifier", **OURS, "num_classes": 5}, "BertForSequenceClassification"),
]


@pytest.mark.parametrize("config,arch", EXPORTS, ids=[a for _, a in EXPORTS])
def test_export(tmp_path, config, arch):
  ckpt, _ = helpers.init_ours(config, TOKENS)
  interop.save(ckpt, str(tmp_path / "hf"), to="hf")
  hf, info = getattr(transformers, arch).from_pretrained(
      str(tmp_path / "hf"), output_loading_info=True
  )
  hf.eval()
  assert not info["missing_keys"] and not info["mismatched_keys"], info
  # Our masked-LM model keeps its (unused) pooler; HF's BertForMaskedLM has none and skips it.
  assert all("pooler" in k for k in info["unexpected_keys"]), info
  ref, ours = hf_outputs(hf), our_outputs(ckpt)
  if arch == "BertForPreTraining":
    assert (
        helpers.max_diff(ours["mlm_logits"][VALID], ref.prediction_logits.numpy()[VALID])
        <= helpers.TOL
    )
    assert helpers.max_diff(ours["nsp_logits"], ref.seq_relationship_logits.numpy()) <= helpers.TOL
  elif arch == "BertForMaskedLM":
    assert hf.config.hidden_act == "gelu_new"
    assert helpers.max_diff(ours["mlm_logits"][VALID], ref.logits.numpy()[VALID]) <= helpers.TOL
  else:
    assert helpers.max_diff(ours, ref.logits.numpy()) <= helpers.TOL
  # And back: the round trip is exact.
  again = interop.load(str(tmp_path / "hf"))
  assert again.model["name"] == config["name"]
  for key, value in ckpt.params.items():
    np.testing.assert_array_equal(again.params[key], value, err_msg=key)


def test_encoder_only_and_new_task_head(tmp_path):
  """HF BertModel -> our bare `Bert`; and into a classifier only with reinit_head."""
  hf, path = save_hf(transformers.BertModel, tmp_path)
  ckpt = interop.load(path)
  assert ckpt.model["name"] == "bert_encoder"
  seq, pooled = our_outputs(ckpt)
  ref = hf_outputs(hf)
  assert helpers.max_diff(seq[VALID], ref.last_hidden_state.numpy()[VALID]) <= helpers.TOL
  assert helpers.max_diff(pooled, ref.pooler_output.numpy()) <= helpers.TOL
  new_task = {"name": "bert_classifier", "num_classes": 4}
  with pytest.raises(interop.ConversionError, match="missing in checkpoint: classifier/kernel"):
    interop.load(path, new_task)
  clf = interop.load(path, new_task, reinit_head=True)
  assert any(n.startswith("classifier/kernel: not in the checkpoint") for n in clf.notes)
  np.testing.assert_array_equal(clf.params["bert/pooler/kernel"], ckpt.params["pooler/kernel"])
  assert clf.module().apply({"params": clf.tree()}, TOKENS, SEGMENTS, MASK).shape == (2, 4)
