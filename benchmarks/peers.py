"""The peers' side of each workload (timm, Hugging Face, torch), on the same shapes in fp32.

Test-only dependencies: importing this module needs torch, timm and transformers. torchvision (which
timm imports) must load before TensorFlow in a process, so import this module first.
"""

import numpy as np
import timm  # imports torchvision
import torch
import transformers

torch.set_num_threads(2)  # the machine's cores, as XLA:CPU uses them


def _train(model, forward_loss):
  model.train()
  optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)

  def run():
    optimizer.zero_grad(set_to_none=True)
    loss = forward_loss()
    loss.backward()
    optimizer.step()

  return run


def vit_train(timm_name, batch_size, image_size, **kwargs):
  model = timm.create_model(timm_name, pretrained=False, img_size=image_size, **kwargs)
  images = torch.randn(batch_size, 3, image_size, image_size)
  labels = torch.randint(0, model.num_classes, (batch_size,))
  return _train(model, lambda: torch.nn.functional.cross_entropy(model(images), labels))


def gpt_config(width, depth, heads, vocab, max_len):
  return transformers.GPT2Config(
      vocab_size=vocab,
      n_embd=width,
      n_layer=depth,
      n_head=heads,
      n_positions=max_len,
      resid_pdrop=0.0,
      embd_pdrop=0.0,
      attn_pdrop=0.0,
      bos_token_id=None,
      eos_token_id=None,
  )


def llama_config(width, depth, heads, kv_heads, mlp_dim, vocab, max_len, tied):
  """A Llama of this shape (RMSNorm, SwiGLU, RoPE, grouped-query attention, no biases)."""
  return transformers.LlamaConfig(
      vocab_size=vocab,
      hidden_size=width,
      intermediate_size=mlp_dim,
      num_hidden_layers=depth,
      num_attention_heads=heads,
      num_key_value_heads=kv_heads,
      max_position_embeddings=max_len,
      tie_word_embeddings=tied,
      bos_token_id=None,
      eos_token_id=None,
      pad_token_id=None,
  )


def gpt_train(config, batch_size, seq_len):
  """A causal LM's step: GPT2LMHeadModel or LlamaForCausalLM, as `config` names."""
  model = transformers.AutoModelForCausalLM.from_config(config)
  tokens = torch.randint(0, config.vocab_size, (batch_size, seq_len))
  return _train(model, lambda: model(input_ids=tokens, labels=tokens).loss)


def bert_mlm_train(width, depth, heads, vocab, batch_size, seq_len, masked):
  config = transformers.BertConfig(
      vocab_size=vocab,
      hidden_size=width,
      num_hidden_layers=depth,
      num_attention_heads=heads,
      intermediate_size=4 * width,
  )
  model = transformers.BertForMaskedLM(config)
  tokens = torch.randint(0, vocab, (batch_size, seq_len))
  labels = torch.full((batch_size, seq_len), -100)
  positions = torch.stack([torch.randperm(seq_len)[:masked] for _ in range(batch_size)])
  labels.scatter_(1, positions, torch.randint(0, vocab, (batch_size, masked)))
  return _train(model, lambda: model(input_ids=tokens, labels=labels).loss)


def gpt_decode(config, batch_size, prompt_len, new_tokens):
  model = transformers.AutoModelForCausalLM.from_config(config).eval()
  prompts = torch.randint(0, config.vocab_size, (batch_size, prompt_len))

  def run():
    with torch.no_grad():
      model.generate(
          prompts,
          attention_mask=torch.ones_like(prompts),
          do_sample=False,
          max_new_tokens=new_tokens,
          min_new_tokens=new_tokens,
          pad_token_id=0,
      )

  return run


def marian_config(width, layers, heads, mlp_dim, vocab, max_len):
  """A Marian of this shape: post-LN, ReLU, sinusoidal positions, one tied vocabulary, no
  dropout (as our side's config)."""
  return transformers.MarianConfig(
      vocab_size=vocab,
      d_model=width,
      encoder_layers=layers,
      decoder_layers=layers,
      encoder_attention_heads=heads,
      decoder_attention_heads=heads,
      encoder_ffn_dim=mlp_dim,
      decoder_ffn_dim=mlp_dim,
      max_position_embeddings=max_len,
      activation_function="relu",
      scale_embedding=True,  # embeddings x sqrt(width), as the original Transformer (and ours)
      dropout=0.0,
      attention_dropout=0.0,
      activation_dropout=0.0,
      pad_token_id=0,
      eos_token_id=1,
      decoder_start_token_id=0,
  )


def marian_train(config, batch_size, input_len, target_len):
  model = transformers.MarianMTModel(config)
  inputs = torch.randint(3, config.vocab_size, (batch_size, input_len))
  tokens = torch.randint(3, config.vocab_size, (batch_size, target_len + 1))
  decoder_inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
  return _train(
      model,
      lambda: model(input_ids=inputs, decoder_input_ids=decoder_inputs, labels=targets).loss,
  )


def marian_beam(config, batch_size, input_len, new_tokens, beam_size):
  """`generate` with beam search; `min_new_tokens` holds every row to `new_tokens` tokens."""
  model = transformers.MarianMTModel(config).eval()
  sources = torch.randint(3, config.vocab_size, (batch_size, input_len))

  def run():
    with torch.no_grad():
      model.generate(
          sources,
          attention_mask=torch.ones_like(sources),
          num_beams=beam_size,
          do_sample=False,
          max_new_tokens=new_tokens,
          min_new_tokens=new_tokens,
      )

  return run


def matmul(size):
  a = torch.from_numpy(np.random.default_rng(0).standard_normal((size, size)).astype(np.float32))
  return lambda: torch.mm(a, a)
