"""Shared pieces of the interop tests: random perturbation of weights, comparisons, tiny configs."""

import jax
import numpy as np

from vit_jax import interop

TOL = 1e-4  # max abs difference of fp32 logits


def perturb_torch(model, seed: int = 0, scale: float = 0.05):
  """Adds noise to every weight (LayerNorm scales, biases), so no mapping hides behind 1s and 0s."""
  import torch  # pylint: disable=g-import-not-at-top

  gen = torch.Generator().manual_seed(seed)
  with torch.no_grad():
    for _, p in model.named_parameters():
      p.add_(torch.randn(p.shape, generator=gen) * scale)
  return model.eval()


def perturb_jax(params, seed: int = 0, scale: float = 0.05):
  leaves, treedef = jax.tree.flatten(params)
  rng = np.random.default_rng(seed)
  return jax.tree.unflatten(
      treedef, [np.asarray(x) + rng.normal(0, scale, x.shape).astype(x.dtype) for x in leaves]
  )


def init_ours(config: dict, *inputs, seed: int = 0):
  """(checkpoint, module) of a freshly initialized (and perturbed) model of ours."""
  module = interop.Checkpoint({}, config).module()
  params = module.init(jax.random.PRNGKey(seed), *inputs)["params"]
  ckpt = interop.from_tree(perturb_jax(params, seed), config)
  return ckpt, module


def max_diff(a, b) -> float:
  return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


# ---- A hub tokenizer, trained here on text every Python ships ----------------------------------

# A chat model's special tokens and prompt format (ChatML, as Qwen's), so that what the hub keeps
# beside tokenizer.json has something to carry.
END_OF_TEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def reference_topics() -> list:
  """The Python reference manual's topics (pydoc_data, in every Python), sorted by name: the
  first 40 train the tokenizer, the rest are held out for prompts."""
  from pydoc_data import topics  # pylint: disable=g-import-not-at-top

  return [topics.topics[name] for name in sorted(topics.topics)]


def save_hub_tokenizer(path: str, vocab_size: int = 320):
  """A byte-level BPE with ChatML's special tokens and chat template, saved as the hub keeps
  it (tokenizer.json, tokenizer_config.json); returns transformers' fast tokenizer."""
  import tokenizers  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top

  tok = tokenizers.Tokenizer(tokenizers.models.BPE())
  tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
  tok.decoder = tokenizers.decoders.ByteLevel()
  trainer = tokenizers.trainers.BpeTrainer(
      vocab_size=vocab_size,
      special_tokens=[END_OF_TEXT, IM_START, IM_END],
      show_progress=False,
      initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
  )
  tok.train_from_iterator(reference_topics()[:40], trainer)
  fast = transformers.PreTrainedTokenizerFast(
      tokenizer_object=tok, eos_token=IM_END, pad_token=END_OF_TEXT
  )
  fast.chat_template = CHAT_TEMPLATE
  fast.save_pretrained(path)
  return fast
