"""The models that interop converts: recognizing them from their params, building them, heads,
and the Checkpoint that holds their params in our names with the model config.

Supported: ViT ("vit"), GPT ("gpt"), and BERT as pretraining ("bert"), masked-LM ("bert_mlm"),
sequence classification ("bert_classifier") models, plus the bare encoder "bert_encoder" (our
`Bert` module, params without the "bert/" prefix; a Hugging Face `BertModel`).
"""

import dataclasses
import math
import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from vit_jax import errors
from vit_jax import models as model_table
from vit_jax.interop import flat_params
from vit_jax.models import bert
from vit_jax.models import vit

SUPPORTED = ("vit", "gpt", "bert", "bert_mlm", "bert_classifier", "bert_encoder", "seq2seq")
BERT_NAMES = ("bert", "bert_mlm", "bert_classifier", "bert_encoder")
# Task heads: re-initialized (or dropped) only when the caller asks for it.
_BERT_HEADS = ("mlm", "nsp", "classifier")
HEADS = {"vit": ("head",), "gpt": (), "seq2seq": (), **{n: _BERT_HEADS for n in BERT_NAMES}}
# Params a model has but never uses for its outputs: filled in fresh when a checkpoint lacks them
# (a Hugging Face BertForMaskedLM has no pooler).
UNUSED = {"bert_mlm": ("bert/pooler",)}
_HEAD_FIELDS = ("next_sentence", "num_classes")  # per-task fields of the BERT models


def _under(key: str, prefixes) -> bool:
  return any(key == p or key.startswith(p + "/") for p in prefixes)


def is_head(name: str, key: str) -> bool:
  """A task head's param, or BERT's pooler: re-initialized or dropped only on request."""
  heads = HEADS[name]
  if name in BERT_NAMES:
    heads += ("pooler",) if name == "bert_encoder" else ("bert/pooler",)
  return _under(key, heads)


def is_unused(name: str, key: str) -> bool:
  return _under(key, UNUSED.get(name, ()))


def rebase(flat: dict, old_name: str, new_name: str) -> dict:
  """Moves BERT encoder params between a bare encoder (top level) and a task model ("bert/")."""
  if old_name == new_name or not {old_name, new_name} <= set(BERT_NAMES):
    return flat
  if old_name == "bert_encoder":
    return {("bert/" + k if not _under(k, _BERT_HEADS) else k): v for k, v in flat.items()}
  if new_name == "bert_encoder":
    return {k.removeprefix("bert/"): v for k, v in flat.items()}
  return flat


def check_supported(config: dict) -> str:
  name = config.get("name")
  if name not in SUPPORTED:
    raise errors.ConversionError(
        f"Checkpoint conversion supports the models {list(SUPPORTED)}, not {name!r}. (Our own "
        "workdirs and .npz files of any model still fine-tune with init_from.)"
    )
  return name


def build(config: dict):
  """The Flax module for `config` (the model table's models, and "bert_encoder" = `Bert`)."""
  name = check_supported(config)
  kwargs = {k: v for k, v in config.items() if k != "name"}
  if name != "bert_encoder":
    return model_table.build_model(config)
  fields = {f.name for f in dataclasses.fields(bert.Bert)} - {"parent", "name"}
  unknown = sorted(set(kwargs) - fields)
  if unknown:
    raise errors.ConfigError(
        f"Unknown option(s) {unknown} for model 'bert_encoder'; valid ones are "
        f"{sorted(fields)}."
    )
  return bert.Bert(**kwargs)


def dummy_inputs(config: dict, flat: dict):
  """Smallest inputs that initialize the model with the checkpoint's parameter shapes."""
  if config["name"] == "seq2seq":  # inputs and decoder inputs
    return (jnp.zeros((1, 2), jnp.int32), jnp.zeros((1, 2), jnp.int32))
  if config["name"] != "vit":
    return (jnp.zeros((1, 2), jnp.int32),)
  _, (ph, pw) = vit.parse_variant(config.get("variant", "B/16"))
  kernel = flat.get("embedding/kernel")
  channels = kernel.shape[2] if kernel is not None and np.ndim(kernel) == 4 else 3
  rows = cols = 1
  table = flat.get("Transformer/posembed_input/pos_embedding")
  if config.get("posemb", "learn") == "learn" and table is not None and np.ndim(table) == 3:
    rows, cols = grid_of(table.shape[1], config.get("classifier", "token") == "token")
  return (jnp.zeros((1, rows * ph, cols * pw, channels), jnp.float32),)


def grid_of(slots: int, has_cls: bool):
  """(rows, cols) of the square patch grid behind a position table of `slots` entries."""
  patches = slots - int(has_cls)
  side = math.isqrt(max(patches, 0))
  if side * side != patches or side == 0:
    raise errors.ConversionError(
        f"The position table has {slots} slots ({patches} patches): not a square patch grid."
    )
  return side, side


def expected_params(config: dict, flat: dict, per_layer: bool = True) -> dict:
  """{key: ShapeDtypeStruct} of the model's params, without computing any values; one entry per
  layer (our checkpoint names) even if the config scans its layers, unless `per_layer=False`."""
  module = build({**config, "scan_layers": False} if per_layer and is_scanned(config) else config)
  variables = jax.eval_shape(
      lambda: module.init(jax.random.PRNGKey(0), *dummy_inputs(config, flat))
  )
  return flat_params.flatten(variables["params"])


def init_params(config: dict, flat: dict, seed: int = 0) -> dict:
  """Freshly initialized params, one entry per layer (for heads that are re-initialized)."""
  module = build({**config, "scan_layers": False} if is_scanned(config) else config)
  variables = module.init(jax.random.PRNGKey(seed), *dummy_inputs(config, flat))
  return {k: np.asarray(v) for k, v in flat_params.flatten(variables["params"]).items()}


def is_scanned(config: dict) -> bool:
  """Whether the model stacks its layers (`scan_layers`; see `vit_jax.interop.flat_params`)."""
  return bool(config.get("scan_layers"))


# ---- Recognizing a model from its params (for a bare .npz) -------------------------------------


def _count(flat: dict, pattern: str) -> int:
  regex = re.compile(pattern)
  return len({m.group(1) for k in flat if (m := regex.match(k))})


def vit_variant(width: int, depth: int, mlp_dim: int, heads: int, patch) -> dict:
  ph, pw = patch
  return dict(
      variant=f"B/{ph}" if ph == pw else f"B/{ph}x{pw}",
      width=width,
      depth=depth,
      mlp_dim=mlp_dim,
      num_heads=heads,
  )


def infer(flat: dict, notes: list) -> dict:
  """Our model config from the parameter names and shapes; raises if no supported model fits."""
  if "embedding/kernel" in flat:
    return _infer_vit(flat, notes)
  if "wte/embedding" in flat:
    return _infer_gpt(flat)
  if "bert/word_embeddings/embedding" in flat or "word_embeddings/embedding" in flat:
    return _infer_bert(flat)
  raise errors.ConversionError(
      "Cannot tell which model these parameters belong to (no ViT 'embedding/kernel', GPT "
      "'wte/embedding' or BERT 'word_embeddings/embedding'); pass the model config (--model). "
      f"First keys: {sorted(flat)[:8]}"
  )


def _need(flat: dict, key: str, ndim: int):
  value = flat.get(key)
  if value is None or np.ndim(value) != ndim:
    raise errors.ConversionError(
        f"Cannot infer the model config: expected {key} with {ndim} "
        f"dimensions, found {None if value is None else value.shape}."
    )
  return value.shape


def _infer_vit(flat: dict, notes: list) -> dict:
  ph, pw, _, width = _need(flat, "embedding/kernel", 4)
  block = "Transformer/encoderblock_0/"
  heads = _need(flat, block + "MultiHeadDotProductAttention_1/query/kernel", 3)[1]
  mlp_dim = _need(flat, block + "MlpBlock_3/Dense_0/kernel", 2)[1]
  depth = _count(flat, r"Transformer/encoderblock_(\d+)/")
  if "cls" in flat:
    classifier = "token"
  elif "MAPHead_0/probe" in flat:
    classifier = "map"
  else:
    classifier = "gap"
  posemb = "learn"
  if "Transformer/posembed_input/pos_embedding" not in flat:
    posemb = "sincos2d"
    notes.append(
        "no learned position table: assuming fixed 2-D sin-cos position embeddings "
        '(pass --model \'{"posemb": "none"}\' otherwise)'
    )
  config = dict(
      name="vit",
      **vit_variant(width, depth, mlp_dim, heads, (ph, pw)),
      classifier=classifier,
      posemb=posemb,
      num_classes=int(flat["head/kernel"].shape[-1]) if "head/kernel" in flat else 0,
  )
  if "pre_logits/kernel" in flat:
    config["representation_size"] = int(flat["pre_logits/kernel"].shape[-1])
  return config


def _infer_gpt(flat: dict) -> dict:
  vocab, width = _need(flat, "wte/embedding", 2)
  block = "decoder/h_0/"
  heads = _need(flat, block + "MultiHeadDotProductAttention_1/query/kernel", 3)[1]
  hidden = _need(flat, block + "MlpBlock_3/Dense_0/kernel", 2)[1]
  if hidden % width:
    raise errors.ConversionError(
        f"GPT MLP width {hidden} is not a multiple of the model width "
        f"{width}; our Gpt has an integer mlp_ratio."
    )
  config = dict(
      name="gpt",
      vocab_size=vocab,
      variant="gpt2",
      width=width,
      depth=_count(flat, r"decoder/h_(\d+)/"),
      num_heads=heads,
      mlp_ratio=hidden // width,
  )
  if "wpe/embedding" in flat:
    config.update(posemb="learn", max_len=flat["wpe/embedding"].shape[0])
  else:
    config["posemb"] = "rope"
  return config


def _infer_bert(flat: dict) -> dict:
  prefix = "bert/" if "bert/word_embeddings/embedding" in flat else ""
  vocab, width = _need(flat, prefix + "word_embeddings/embedding", 2)
  block = prefix + "encoder/layer_0/"
  config = dict(
      vocab_size=vocab,
      variant="base",
      width=width,
      depth=_count(flat, re.escape(prefix) + r"encoder/layer_(\d+)/"),
      num_heads=_need(flat, block + "MultiHeadDotProductAttention_1/query/kernel", 3)[1],
      mlp_dim=_need(flat, block + "MlpBlock_3/Dense_0/kernel", 2)[1],
      max_len=_need(flat, prefix + "position_embeddings/embedding", 2)[0],
      type_vocab_size=_need(flat, prefix + "token_type_embeddings/embedding", 2)[0],
  )
  if not prefix:
    return dict(name="bert_encoder", **config)
  if "classifier/kernel" in flat:
    return dict(name="bert_classifier", **config, num_classes=flat["classifier/kernel"].shape[-1])
  if "nsp/kernel" in flat:
    return dict(name="bert", **config, next_sentence=True)
  return dict(name="bert_mlm", **config)


def configure(config: dict, overrides: dict | None) -> dict:
  """`config` updated by the caller's `overrides`. Another BERT task keeps the encoder's config
  but not the old task's fields; another model family takes `overrides` as the whole config."""
  overrides = dict(overrides or {})
  merged = {**config, **overrides}
  if merged.get("name") != config.get("name"):
    if not {merged.get("name"), config.get("name")} <= set(BERT_NAMES):
      merged = overrides  # another family: the caller's config is the whole config
    for key in _HEAD_FIELDS:
      if key not in overrides:
        merged.pop(key, None)
  # Plain Python numbers, so the config serializes as JSON (model records, config.json).
  return {k: int(v) if isinstance(v, np.integer) else v for k, v in merged.items()}


@dataclasses.dataclass
class Checkpoint:
  """Parameters in our names and layouts, with the config of the model they belong to.

  Attributes:
    params: flat {"a/b/c": np.ndarray}, the leaves of our model's "params" tree, with one entry
      per layer also for a model that scans its layers (`scan_layers`; see `tree()`).
    model: our model config, {"name": ..., **module kwargs} as `build_model` takes it.
    notes: what the conversion adapted or assumed, for the user to read.
    tokenizer: the tokenizer that came with the checkpoint (a `vit_jax.data.tokenizers`
      Tokenizer: a workdir's, or a Hugging Face `tokenizer.json`), or None.
  """

  params: dict
  model: dict
  notes: list = dataclasses.field(default_factory=list)
  tokenizer: Any = None

  def tree(self) -> dict:
    """The nested params, ready for `ckpt.module().apply({"params": ckpt.tree()}, ...)` (stacked
    when the model config scans its layers)."""
    if is_scanned(self.model):
      stacked = expected_params(self.model, self.params, per_layer=False)
      return flat_params.unflatten(flat_params.stack_layers(self.params, stacked))
    return flat_params.unflatten(self.params)

  def module(self, **overrides):
    """The (unbound) Flax module these parameters belong to."""
    return build({**self.model, **overrides})
