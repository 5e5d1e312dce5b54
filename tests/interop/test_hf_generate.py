"""A Hugging Face GPT-2 with its tokenizer, imported by `vit_jax.convert`, generates with
`vit_jax.generate` the very tokens that Hugging Face's own `generate` does; and back again."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.interop import helpers
from vit_jax import convert
from vit_jax import interop

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
hf_tokenizers = pytest.importorskip("tokenizers")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EOS = "<|endoftext|>"
TEXT = """The quick brown fox jumps over the lazy dog. A journey of a thousand miles begins with a
single step. All that glitters is not gold. The early bird catches the worm, and the second mouse
gets the cheese. Where there is smoke there is fire; where there is a will there is a way.""".split(
    ". "
)
PROMPT = "The early bird"
NEW_TOKENS = 12


def save_hf_gpt2(path: str):
  """A tiny random GPT2LMHeadModel and a byte-level BPE trained here, saved as HF saves them."""
  tok = hf_tokenizers.Tokenizer(hf_tokenizers.models.BPE())
  tok.pre_tokenizer = hf_tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
  tok.decoder = hf_tokenizers.decoders.ByteLevel()
  trainer = hf_tokenizers.trainers.BpeTrainer(
      vocab_size=300,
      special_tokens=[EOS],
      show_progress=False,
      initial_alphabet=hf_tokenizers.pre_tokenizers.ByteLevel.alphabet(),
  )
  tok.train_from_iterator(TEXT * 4, trainer)
  fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, bos_token=EOS)
  fast.save_pretrained(path)
  eos_id = tok.token_to_id(EOS)
  torch.manual_seed(0)
  config = transformers.GPT2Config(
      vocab_size=tok.get_vocab_size(),
      n_embd=32,
      n_layer=2,
      n_head=4,
      n_positions=64,
      resid_pdrop=0.0,
      embd_pdrop=0.0,
      attn_pdrop=0.0,
      initializer_range=0.2,
      bos_token_id=eos_id,
      eos_token_id=eos_id,
  )
  model = helpers.perturb_torch(transformers.GPT2LMHeadModel(config))
  model.save_pretrained(path)
  return model, fast


def run_cli(*args):
  return subprocess.run(
      [sys.executable, "-m", *args],
      capture_output=True,
      text=True,
      cwd=ROOT,
      timeout=300,
      env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3"),
  )


def test_imported_gpt2_generates_like_hugging_face(tmp_path):
  hf, fast = save_hf_gpt2(str(tmp_path / "hf"))
  prompt_ids = fast(PROMPT, add_special_tokens=False)["input_ids"]
  with torch.no_grad():
    out = hf.generate(
        torch.tensor([prompt_ids]),
        max_new_tokens=NEW_TOKENS,
        do_sample=False,
        pad_token_id=fast.eos_token_id,
    )
  want = [int(t) for t in out[0, len(prompt_ids) :]]

  workdir = str(tmp_path / "workdir")
  converted = run_cli("vit_jax.convert", str(tmp_path / "hf"), workdir, "--to", "orbax")
  assert converted.returncode == 0, converted.stderr
  assert "note: read the tokenizer (tokenizer.json" in converted.stdout
  with open(os.path.join(workdir, "config.json"), encoding="utf-8") as f:
    assert json.load(f)["task"] == "causal_lm"
  generated = run_cli(
      "vit_jax.generate",
      f"--workdir={workdir}",
      f"--prompt={PROMPT}",
      "--temperature=0",
      f"--max_new_tokens={NEW_TOKENS}",
      "--print_ids",
  )
  assert generated.returncode == 0, generated.stderr
  ids_line = [line for line in generated.stdout.splitlines() if line.startswith("ids: ")]
  assert [int(t) for t in ids_line[0].split()[1:]] == want, generated.stdout
  assert generated.stdout.startswith(PROMPT + fast.decode(want, skip_special_tokens=True))

  # The tokenizer kept its special tokens: our eos is Hugging Face's.
  ckpt = interop.load(workdir)
  assert ckpt.tokenizer.eos_id == fast.eos_token_id
  assert ckpt.tokenizer.encode(PROMPT) == prompt_ids

  # Ours -> Hugging Face writes tokenizer.json too, which transformers loads as it was.
  assert convert.main([workdir, str(tmp_path / "hf2"), "--to", "hf"]) == 0
  again = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf2"))
  assert again(PROMPT, add_special_tokens=False)["input_ids"] == prompt_ids
  assert again.eos_token_id == fast.eos_token_id
  hf2 = transformers.GPT2LMHeadModel.from_pretrained(str(tmp_path / "hf2")).eval()
  assert hf2.config.eos_token_id == fast.eos_token_id
  tokens = np.array([prompt_ids])
  with torch.no_grad():
    assert (
        helpers.max_diff(
            hf2(torch.tensor(tokens)).logits.numpy(), hf(torch.tensor(tokens)).logits.numpy()
        )
        <= helpers.TOL
    )


def test_imported_bert_keeps_its_wordpiece_tokenizer(tmp_path):
  """A masked-LM import carries BERT's tokenizer, [MASK] and all, for fill-in predictions."""
  specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  words = sorted({w.strip(".,;").lower() for line in TEXT for w in line.split()})
  vocab = {t: i for i, t in enumerate(specials + words + [f"##{c}" for c in "abcdefghij"])}
  tok = hf_tokenizers.Tokenizer(hf_tokenizers.models.WordPiece(vocab, unk_token="[UNK]"))
  tok.normalizer = hf_tokenizers.normalizers.BertNormalizer(lowercase=True)
  tok.pre_tokenizer = hf_tokenizers.pre_tokenizers.BertPreTokenizer()
  tok.decoder = hf_tokenizers.decoders.WordPiece()
  fast = transformers.PreTrainedTokenizerFast(
      tokenizer_object=tok,
      unk_token="[UNK]",
      pad_token="[PAD]",
      cls_token="[CLS]",
      sep_token="[SEP]",
      mask_token="[MASK]",
  )
  fast.save_pretrained(tmp_path / "hf")
  torch.manual_seed(0)
  config = transformers.BertConfig(
      vocab_size=len(vocab),
      hidden_size=32,
      num_hidden_layers=1,
      num_attention_heads=4,
      intermediate_size=64,
      max_position_embeddings=24,
  )
  transformers.BertForMaskedLM(config).save_pretrained(tmp_path / "hf")

  ckpt = interop.convert(str(tmp_path / "hf"), str(tmp_path / "workdir"), to="orbax")
  assert ckpt.model["name"] == "bert_mlm"
  with open(tmp_path / "workdir" / "config.json", encoding="utf-8") as f:
    assert json.load(f)["task"] == "masked_lm"
  loaded = interop.load(str(tmp_path / "workdir")).tokenizer
  assert (loaded.pad_id, loaded.unk_id, loaded.cls_id, loaded.sep_id, loaded.mask_id) == (
      0,
      1,
      2,
      3,
      4,
  )
  assert (
      loaded.encode("The lazy fox") == fast("The lazy fox", add_special_tokens=False)["input_ids"]
  )
  assert loaded.fingerprint == ckpt.tokenizer.fingerprint
