"""Hugging Face BERT (`BertModel`, `BertForPreTraining`, `BertForMaskedLM`,
`BertForSequenceClassification`) <-> our "bert_encoder", "bert", "bert_mlm", "bert_classifier".

Theirs (task models prefix `bert.`)           ours (task models prefix `bert/`)
embeddings.{word,position,token_type}_embeddings  {word,position,token_type}_embeddings/embedding
embeddings.LayerNorm                          embeddings_norm
encoder.layer.{i}.attention.self.{query,key,value}
                                              encoder/layer_{i}/MultiHeadDotProductAttention_1/
                                              {query,key,value}: Linear (H*K, D) -> (D, H, K)
encoder.layer.{i}.attention.output.dense      .../MultiHeadDotProductAttention_1/out: -> (H, K, D)
encoder.layer.{i}.attention.output.LayerNorm  encoder/layer_{i}/LayerNorm_0 (post-LN)
encoder.layer.{i}.intermediate.dense, output.dense  encoder/layer_{i}/MlpBlock_3/Dense_0, Dense_1
encoder.layer.{i}.output.LayerNorm            encoder/layer_{i}/LayerNorm_2
pooler.dense                                  pooler (absent in BertForMaskedLM)
cls.predictions.transform.dense, .LayerNorm   mlm/transform, mlm/transform_norm
cls.predictions.bias                          mlm/output_bias (the decoder weight is tied to the
                                              word embeddings, as in ours)
cls.seq_relationship                          nsp
classifier                                    classifier
"""

import numpy as np

from vit_jax import errors
from vit_jax.interop import hf_rules as R
from vit_jax.interop import models

ARCHITECTURES = {
    "BertModel": "bert_encoder",
    "BertForPreTraining": "bert",
    "BertForMaskedLM": "bert_mlm",
    "BertForSequenceClassification": "bert_classifier",
}
OUR_NAMES = tuple(ARCHITECTURES.values())
# Buffers older checkpoints saved beside the weights.
_IGNORE = (r"(bert\.)?embeddings\.position_ids",)
_DECODER = "cls.predictions.decoder.weight"  # tied to the word embeddings
_DECODER_BIAS = "cls.predictions.decoder.bias"  # the same tensor as cls.predictions.bias


def _rules(depth: int, heads: int, bare: bool, parts) -> list:
  """Rules for the encoder and the heads in `parts` (all optional on import)."""
  t, o = ("", "") if bare else ("bert.", "bert/")
  rules = [
      R.rule(f"{t}embeddings.{n}_embeddings.weight", f"{o}{n}_embeddings/embedding")
      for n in ("word", "position", "token_type")
  ]
  rules += R.layer_norm(f"{t}embeddings.LayerNorm", f"{o}embeddings_norm")
  for i in range(depth):
    layer, ours = f"{t}encoder.layer.{i}.", f"{o}encoder/layer_{i}/"
    rules += R.attention(
        {p: f"{layer}attention.self.{p}" for p in ("query", "key", "value")}
        | {"out": f"{layer}attention.output.dense"},
        ours + "MultiHeadDotProductAttention_1",
        heads,
    )
    rules += R.layer_norm(f"{layer}attention.output.LayerNorm", ours + "LayerNorm_0")
    rules += R.dense(f"{layer}intermediate.dense", ours + "MlpBlock_3/Dense_0")
    rules += R.dense(f"{layer}output.dense", ours + "MlpBlock_3/Dense_1")
    rules += R.layer_norm(f"{layer}output.LayerNorm", ours + "LayerNorm_2")
  rules += R.dense(f"{t}pooler.dense", f"{o}pooler", optional=True)
  heads_rules = {
      "mlm": (
          R.dense("cls.predictions.transform.dense", "mlm/transform")
          + R.layer_norm("cls.predictions.transform.LayerNorm", "mlm/transform_norm")
          + [R.rule("cls.predictions.bias", "mlm/output_bias")]
      ),
      "nsp": R.dense("cls.seq_relationship", "nsp"),
      "classifier": R.dense("classifier", "classifier"),
  }
  for part in parts:
    rules += heads_rules[part]
  return rules


_PARTS = {
    "bert_encoder": (),
    "bert": ("mlm", "nsp"),
    "bert_mlm": ("mlm",),
    "bert_classifier": ("classifier",),
}


def _optional(rules: list) -> list:
  return [
      R.Rule(r.theirs, r.ours, r.to_ours, r.to_theirs, True)
      if r.theirs.startswith(("cls.", "classifier."))
      else r
      for r in rules
  ]


def import_(hf_config: dict, tensors: dict):
  """HF config + tensors -> (our model config, flat params, notes)."""
  tensors = dict(tensors)
  bare = "embeddings.word_embeddings.weight" in tensors
  guessed = (
      "bert_classifier"
      if "classifier.weight" in tensors
      else "bert"
      if "cls.seq_relationship.weight" in tensors
      else "bert_mlm"
      if "cls.predictions.bias" in tensors
      else "bert_encoder"
  )
  arch = R.architecture(hf_config, ARCHITECTURES, {v: k for k, v in ARCHITECTURES.items()}[guessed])
  name = ARCHITECTURES[arch]
  notes = []
  if hf_config.get("position_embedding_type", "absolute") != "absolute":
    raise errors.ConversionError(
        f"Unsupported position_embedding_type="
        f"{hf_config['position_embedding_type']!r}: ours is 'absolute'."
    )
  if hf_config.get("is_decoder") or hf_config.get("add_cross_attention"):
    raise errors.ConversionError(
        "BERT as a decoder (is_decoder / add_cross_attention) is not "
        "supported: ours is an encoder."
    )
  if hf_config.get("classifier_dropout") is not None:
    notes.append("classifier_dropout is not kept: our classifier uses the encoder's dropout_rate")
  if bare and name != "bert_encoder":
    notes.append(
        f"the config names {arch} but the weights are a BertModel's (no 'bert.' "
        "prefix): read as our bare encoder"
    )
    name = "bert_encoder"
  if not bare and name == "bert_encoder":
    raise errors.ConversionError(
        "The config names BertModel but the weights are prefixed with "
        "'bert.' (a task model); fix `architectures` in config.json."
    )
  if _DECODER_BIAS in tensors:  # tied alias of cls.predictions.bias
    bias = tensors.pop(_DECODER_BIAS)
    tensors.setdefault("cls.predictions.bias", bias)
  if _DECODER in tensors:
    word = tensors.get(("" if bare else "bert.") + "embeddings.word_embeddings.weight")
    if word is None or not np.array_equal(tensors.pop(_DECODER), word):
      raise errors.ConversionError(
          f"{_DECODER} differs from the word embeddings: untied MLM "
          "decoders are not supported (ours ties them)."
      )
  config = dict(
      name=name,
      vocab_size=hf_config["vocab_size"],
      variant="base",
      width=hf_config["hidden_size"],
      depth=hf_config["num_hidden_layers"],
      num_heads=hf_config["num_attention_heads"],
      mlp_dim=hf_config["intermediate_size"],
      max_len=hf_config.get("max_position_embeddings", 512),
      type_vocab_size=hf_config.get("type_vocab_size", 2),
      dropout_rate=hf_config.get("hidden_dropout_prob", 0.1),
      attention_dropout_rate=hf_config.get("attention_probs_dropout_prob", 0.1),
      norm_eps=hf_config.get("layer_norm_eps", 1e-12),
      activation=R.activation(hf_config, "hidden_act", "gelu"),
  )
  if name == "bert_classifier":
    config["num_classes"] = R.num_labels(hf_config)
  rules = _optional(
      _rules(config["depth"], config["num_heads"], bare, ("mlm", "nsp", "classifier"))
  )
  flat = R.import_tensors(tensors, rules, _IGNORE, source="Hugging Face BERT checkpoint")
  return config, flat, notes


def export(config: dict, flat: dict):
  """Our BERT model config + flat params -> (HF config, tensors)."""
  model = models.build(config)
  name = config["name"]
  if name == "bert" and not model.next_sentence:
    name = "bert_mlm"  # pretraining without the next-sentence head is HF's BertForMaskedLM
  encoder = model if name == "bert_encoder" else model.bert
  shape = encoder.shape()
  hf_config = dict(
      model_type="bert",
      architectures=[{v: k for k, v in ARCHITECTURES.items()}[name]],
      vocab_size=encoder.vocab_size,
      hidden_size=shape.width,
      num_hidden_layers=shape.depth,
      num_attention_heads=shape.num_heads,
      intermediate_size=shape.mlp_dim,
      hidden_act=R.TO_HF_ACTIVATION[encoder.activation],
      hidden_dropout_prob=encoder.dropout_rate,
      attention_probs_dropout_prob=encoder.attention_dropout_rate,
      max_position_embeddings=encoder.max_len,
      type_vocab_size=encoder.type_vocab_size,
      layer_norm_eps=encoder.norm_eps,
      position_embedding_type="absolute",
      initializer_range=0.02,
      pad_token_id=0,
      tie_word_embeddings=True,
      dtype=R.dtype_name(flat),
  )
  if name == "bert_classifier":
    hf_config.update(R.labels(model.num_classes))
  rules = _rules(shape.depth, shape.num_heads, name == "bert_encoder", _PARTS[name])
  return hf_config, R.export_tensors(flat, rules, target="Hugging Face BERT checkpoint")
