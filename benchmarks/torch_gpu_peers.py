"""The PyTorch peers of the one-GPU benchmark, each as its users train on a GPU: nanoGPT's GPT-2
124M from its checkout's model.py with train.py's defaults, and timm's vit_base_patch16_224 as
timm's train.py runs it. Both bf16 autocast, fused AdamW, under torch.compile or eager.

nanoGPT (train.py): GPTConfig with vocab_size 50,304 (padded "for efficiency"), bias False,
dropout 0; `configure_optimizers(weight_decay=0.1, learning_rate=6e-4, betas=(0.9, 0.95))`,
which takes the fused AdamW on CUDA; TF32 allowed; `torch.compile(model)`; a step is the forward
and loss under bf16 autocast, backward, `clip_grad_norm_(1.0)`, the optimizer step and
`zero_grad(set_to_none=True)`. Token ids are drawn over GPT-2's 50,257 (the data nanoGPT reads).
timm (train.py `--amp --amp-dtype bfloat16 --torchcompile`): the model compiled, cross-entropy
with label smoothing 0.1 (its default without mixup), AdamW (fused; weight decay 0.05 on weights
only, as timm's param groups leave biases and norms out), no clipping (its default).

A step returns a `Pending`, which `step_timing.wait` blocks on like a JAX array. Importing this
module needs torch (and timm for the ViT); the batches are made on the CPU by the `*_batch`
functions, so their shapes and values are testable without a GPU.
"""

import importlib.util
import os

import numpy as np
import torch

GPT2_VOCAB = 50_257  # the ids in GPT-2 tokenized data
NANOGPT_VOCAB = 50_304  # nanoGPT's model: GPT-2's padded to a multiple of 64
VIT_CLASSES = 1000


class Pending:
  """The result of a dispatched step: `block_until_ready` waits for the GPU's queued work."""

  def __init__(self, loss):
    self.loss = loss

  def block_until_ready(self):
    torch.cuda.synchronize()
    return self


def nanogpt_batch(batch_size: int, seq_len: int, seed: int = 0):
  """(inputs, targets), (B, L) int64 token ids over GPT-2's vocabulary: one window of L + 1."""
  tokens = np.random.default_rng(seed).integers(0, GPT2_VOCAB, (batch_size, seq_len + 1))
  return torch.from_numpy(tokens[:, :-1].copy()), torch.from_numpy(tokens[:, 1:].copy())


def vit_batch(batch_size: int, image_size: int = 224, seed: int = 0):
  """(images (B, 3, H, W) float32, labels (B,) int64 over the classes)."""
  rng = np.random.default_rng(seed)
  images = rng.standard_normal((batch_size, 3, image_size, image_size), dtype=np.float32)
  labels = rng.integers(0, VIT_CLASSES, batch_size)
  return torch.from_numpy(images), torch.from_numpy(labels)


def _model_module(checkout: str):
  spec = importlib.util.spec_from_file_location("nanogpt_model", os.path.join(checkout, "model.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _allow_tf32():
  torch.backends.cuda.matmul.allow_tf32 = True  # nanoGPT train.py; timm leaves it to the user
  torch.backends.cudnn.allow_tf32 = True


def nanogpt_step(checkout: str, batch_size: int, seq_len: int, compiled: bool, depth=None):
  """A callable running one nanoGPT training step on the GPU; `depth`: fewer layers (smoke)."""
  module = _model_module(checkout)
  _allow_tf32()
  config = module.GPTConfig(
      block_size=seq_len,
      vocab_size=NANOGPT_VOCAB,
      n_layer=depth or 12,
      n_head=12,
      n_embd=768,
      dropout=0.0,
      bias=False,
  )
  model = module.GPT(config).to("cuda")
  optimizer = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95), "cuda")
  if compiled:
    model = torch.compile(model)
  inputs, targets = (t.to("cuda") for t in nanogpt_batch(batch_size, seq_len))

  def step():
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
      _, loss = model(inputs, targets)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return Pending(loss.detach())

  return step


def timm_vit_step(batch_size: int, compiled: bool, depth=None, image_size: int = 224):
  """A callable running one timm ViT-B/16 training step on the GPU; `depth`: fewer blocks."""
  import timm  # pylint: disable=g-import-not-at-top  (the ViT peer only)

  kwargs = {"depth": depth} if depth else {}
  model = timm.create_model(
      "vit_base_patch16_224",
      pretrained=False,
      num_classes=VIT_CLASSES,
      img_size=image_size,
      **kwargs,
  ).to("cuda")
  model.train()
  decay = [p for p in model.parameters() if p.ndim >= 2]
  no_decay = [p for p in model.parameters() if p.ndim < 2]
  optimizer = torch.optim.AdamW(
      [{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}],
      lr=1e-3,
      fused=True,
  )
  loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
  if compiled:
    model = torch.compile(model)
  images, labels = (t.to("cuda") for t in vit_batch(batch_size, image_size))

  def step():
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
      loss = loss_fn(model(images), labels)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return Pending(loss.detach())

  return step
