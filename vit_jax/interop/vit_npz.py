"""ViT `.npz` layouts: the original ViT names (which are ours) and big_vision's.

big_vision (and timm's reader of its files) differs from the original ViT code in:
  * the `params/` prefix;
  * Linen's own numbering inside a block: `MultiHeadDotProductAttention_0`, `LayerNorm_1`,
    `MlpBlock_0` for our `MultiHeadDotProductAttention_1`, `LayerNorm_2`, `MlpBlock_3`;
  * the learned position table `pos_embedding` (1, N, D) at the top level, WITHOUT a slot for
    the cls token: big_vision adds the position embedding first and prepends the cls token after.
    Ours (the original layout) holds a cls slot (1, 1 + N, D) added to the cls token. So on
    export the cls slot is folded into the token (cls + pos[0]), on import it is a zero slot:
    both give the same first token, bit for bit;
  * in `scan` models, all blocks stacked along a leading depth axis in `Transformer/encoderblock`.
Older files hold everything under the optimizer prefix `opt/target/`.
"""

import re

import numpy as np

LAYOUTS = ("vit", "big_vision")
POSEMB = "Transformer/posembed_input/pos_embedding"
_BV_POSEMB = "pos_embedding"
_PREFIXES = ("opt/target/", "params/img/", "params/")
# Our module name -> big_vision's, for the first name inside a block.
_BLOCK_NAMES = {
    "MultiHeadDotProductAttention_1": "MultiHeadDotProductAttention_0",
    "LayerNorm_2": "LayerNorm_1",
    "MlpBlock_3": "MlpBlock_0",
}
_BLOCK = re.compile(r"(Transformer/encoderblock_\d+/)([^/]+)(/.*)")
_SCANNED = "Transformer/encoderblock/"


def strip_prefix(flat: dict) -> tuple[dict, str]:
  """Removes a prefix that every key shares (optimizer or big_vision); returns it too."""
  for prefix in _PREFIXES:
    if flat and all(k.startswith(prefix) for k in flat):
      return {k[len(prefix) :]: v for k, v in flat.items()}, prefix
  return flat, ""


def is_big_vision(flat: dict) -> bool:
  """True for big_vision names (after `strip_prefix`)."""
  return (
      _BV_POSEMB in flat
      or any(k.startswith(_SCANNED) for k in flat)
      or any(
          re.match(r"Transformer/encoderblock_\d+/MultiHeadDotProductAttention_0/", k) for k in flat
      )
  )


def _rename_blocks(flat: dict, names: dict) -> dict:
  out = {}
  for key, value in flat.items():
    match = _BLOCK.fullmatch(key)
    if match:
      key = match.group(1) + names.get(match.group(2), match.group(2)) + match.group(3)
    out[key] = value
  return out


def from_big_vision(flat: dict) -> dict:
  """big_vision names (prefix already stripped) -> ours."""
  flat = dict(flat)
  for key in [k for k in flat if k.startswith(_SCANNED)]:  # unstack scanned blocks
    stacked_LxS = flat.pop(key)
    for i, value in enumerate(stacked_LxS):
      flat[f"Transformer/encoderblock_{i}/{key[len(_SCANNED):]}"] = value
  flat = _rename_blocks(flat, {v: k for k, v in _BLOCK_NAMES.items()})
  if _BV_POSEMB in flat:
    pos_1xNxD = flat.pop(_BV_POSEMB)
    if "cls" in flat:  # the cls token had no position embedding: give it a zero slot
      pos_1xNxD = np.concatenate([np.zeros_like(pos_1xNxD[:, :1]), pos_1xNxD], axis=1)
    flat[POSEMB] = pos_1xNxD
  return flat


def to_big_vision(flat: dict) -> dict:
  """Our names -> big_vision's, with the `params/` prefix."""
  flat = _rename_blocks(flat, _BLOCK_NAMES)
  if POSEMB in flat:
    pos_1xLxD = flat.pop(POSEMB)
    if "cls" in flat:  # fold the cls slot into the token: the first token stays cls + pos[0]
      flat["cls"] = flat["cls"] + pos_1xLxD[:, :1]
      pos_1xLxD = pos_1xLxD[:, 1:]
    flat[_BV_POSEMB] = pos_1xLxD
  return {"params/" + k: v for k, v in flat.items()}
