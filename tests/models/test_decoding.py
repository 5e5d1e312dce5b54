"""The on-device decoder: equals Hugging Face greedy token for token and compiles once per shape."""

import numpy as np
import pytest

from tests.interop import test_gpt2_hf
from vit_jax import interop
from vit_jax.models import sampling

torch = pytest.importorskip("torch")


def test_generate_matches_hf_and_reuses_its_compiled_decoder(tmp_path):
  hf, path = test_gpt2_hf.save_hf(tmp_path, init_scale=0.5)
  ckpt = interop.load(path)
  prompt_BxT = test_gpt2_hf.TOKENS[:, :5]
  with torch.no_grad():
    ref_BxN = hf.generate(
        torch.tensor(prompt_BxT, dtype=torch.long),
        do_sample=False,
        max_new_tokens=16,
        pad_token_id=0,
        attention_mask=torch.ones(prompt_BxT.shape, dtype=torch.long),
    ).numpy()
  ours = sampling.generate(ckpt.model, ckpt.tree(), prompt_BxT.tolist(), max_new_tokens=16)
  np.testing.assert_array_equal(np.array(ours), ref_BxN[:, 5:])
  decoders = len(sampling._DECODERS)  # pylint: disable=protected-access
  other = (prompt_BxT[::-1] + 1).tolist()
  sampling.generate(ckpt.model, ckpt.tree(), other, max_new_tokens=16)
  assert len(sampling._DECODERS) == decoders  # pylint: disable=protected-access
  (decoder,) = [
      d
      for k, d in sampling._DECODERS.items()  # pylint: disable=protected-access
      if k[1] == prompt_BxT.shape[:1] + (21,)
  ]
  assert decoder._cache_size() == 1  # pylint: disable=protected-access


def test_ragged_prompts_equal_each_prompt_alone_at_eos(tmp_path):
  _, path = test_gpt2_hf.save_hf(tmp_path, init_scale=0.5)
  ckpt = interop.load(path)
  prompts = [[5, 17, 33, 2, 45, 60, 8], [11, 12], [50, 40, 41, 42]]
  alone = [sampling.generate(ckpt.model, ckpt.tree(), [p], max_new_tokens=10)[0] for p in prompts]
  eos = alone[1][3]
  batched = sampling.generate(ckpt.model, ckpt.tree(), prompts, max_new_tokens=10, eos_id=eos)
  for row, full in zip(batched, alone):
    cut = full.index(eos) + 1 if eos in full else len(full)
    assert row == full[:cut]
