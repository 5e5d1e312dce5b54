"""The converted checkpoint: parameters in our names, with the config of their model."""

import dataclasses
from typing import Any

from vit_jax.interop import common
from vit_jax.interop import models
from vit_jax.interop import scan


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
    if models.is_scanned(self.model):
      stacked = models.expected_params(self.model, self.params, per_layer=False)
      return common.unflatten(scan.stack_layers(self.params, stacked))
    return common.unflatten(self.params)

  def module(self, **overrides):
    """The (unbound) Flax module these parameters belong to."""
    return models.build({**self.model, **overrides})
