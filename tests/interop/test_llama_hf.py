"""Llama, Mistral, Qwen2 and Qwen3 from Hugging Face: our gpt with their block options gives the
same next-token log-probabilities, and the same greedy continuation through the KV cache; a hub
folder (one file or bf16 shards, with its tokenizer and chat template) converts to a workdir and
back to a folder transformers loads with equal weights; what ours cannot compute is refused in
one line (what converting holds in memory: test_conversion_memory.py)."""

import json
import os
import shutil

import jax
import numpy as np
import pytest

from tests import helpers as tests_helpers
from tests import peers
from tests import tiny_configs
from tests.interop import helpers
from vit_jax import convert
from vit_jax import errors
from vit_jax import interop
from vit_jax.interop import hf_llama
from vit_jax.models import build_model
from vit_jax.models import sampling
from vit_jax.training import train

torch = peers.require("torch")
transformers = peers.require("transformers")

VOCAB = 320  # helpers.save_hub_tokenizer's
TOKENS = np.array(
    [[5, 17, 33, 2, 45, 60, 8, 9, 30, 1, 0, 7], [11, 12, 13, 50, 40, 41, 42, 3, 4, 319, 21, 22]],
    np.int32,
)
SHAPE = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=96,
    max_position_embeddings=64,
    rms_norm_eps=1e-5,
    initializer_range=0.2,  # large: a tiny model's greedy tokens then differ from step to step
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
)
# Llama: llama3 RoPE scaling, untied; at head width 16, base 10,000 and an original length of
# 32, its frequencies fall in all three bands (kept, blended, divided). Mistral: no sliding
# window (as from Mistral 7B v0.2 on). Qwen2: query/key/value biases, tied. Qwen3: QK-norm,
# linear scaling, heads 24 wide (not 64 / 4 = 16, as Qwen3's own configs set head_dim apart).
FAMILIES = {
    "llama": lambda: transformers.LlamaForCausalLM(
        transformers.LlamaConfig(
            **SHAPE,
            tie_word_embeddings=False,
            rope_theta=10_000.0,
            rope_scaling=dict(
                rope_type="llama3",
                factor=8.0,
                low_freq_factor=1.0,
                high_freq_factor=4.0,
                original_max_position_embeddings=32,
            ),
        )
    ),
    "mistral": lambda: transformers.MistralForCausalLM(
        transformers.MistralConfig(**SHAPE, sliding_window=None, rope_theta=100_000.0)
    ),
    "qwen2": lambda: transformers.Qwen2ForCausalLM(
        transformers.Qwen2Config(**SHAPE, tie_word_embeddings=True, rope_theta=1_000_000.0)
    ),
    "qwen3": lambda: transformers.Qwen3ForCausalLM(
        transformers.Qwen3Config(
            **SHAPE,
            head_dim=24,
            tie_word_embeddings=False,
            rope_scaling=dict(rope_type="linear", factor=2.0),
        )
    ),
}
# What each exports as: a Mistral without its window is Llama's network.
EXPORTED = {
    "llama": "LlamaForCausalLM",
    "mistral": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
}


def log_probs(logits):
  return np.asarray(jax.nn.log_softmax(np.asarray(logits, np.float64), axis=-1))


# Published configs (built here, offline): SmolLM2-135M, and Qwen3-0.6B, whose 16 heads are 128
# wide in a 1024-wide model.
PUBLISHED = {
    "SmolLM2-135M": (
        dict(
            model_type="llama",
            architectures=["LlamaForCausalLM"],
            vocab_size=49152,
            hidden_size=576,
            num_hidden_layers=30,
            num_attention_heads=9,
            num_key_value_heads=3,
            intermediate_size=1536,
            max_position_embeddings=8192,
            rms_norm_eps=1e-5,
            rope_theta=100_000.0,
            tie_word_embeddings=True,
            hidden_act="silu",
        ),
        134_515_008,
    ),
    "Qwen3-0.6B": (
        dict(
            model_type="qwen3",
            architectures=["Qwen3ForCausalLM"],
            vocab_size=151936,
            hidden_size=1024,
            num_hidden_layers=28,
            num_attention_heads=16,
            num_key_value_heads=8,
            head_dim=128,
            intermediate_size=3072,
            max_position_embeddings=40960,
            rms_norm_eps=1e-6,
            rope_theta=1_000_000.0,
            tie_word_embeddings=True,
            hidden_act="silu",
            attention_bias=False,
            use_sliding_window=False,
            sliding_window=None,
        ),
        596_049_920,
    ),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_configs_have_transformers_parameter_count(name):
  hub, published = PUBLISHED[name]
  architecture = getattr(transformers, hub["architectures"][0])
  with torch.device("meta"):  # shapes only
    theirs = architecture(architecture.config_class(**hub))
  count = sum(p.numel() for p in theirs.parameters())
  model = build_model(hf_llama.config_from_hf(hub), scan_layers=True)  # one block to trace
  shapes = jax.eval_shape(model.init, jax.random.PRNGKey(0), np.zeros((1, 8), np.int32))
  assert sum(x.size for x in jax.tree.leaves(shapes)) == count == published


# ---- Hub folders both ways --------------------------------------------------------------------


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
  """{family: a hub folder}: the model as save_pretrained writes it (Qwen2's in bfloat16 shards
  with their index), the tokenizer and chat template beside it (Llama's template kept in
  tokenizer_config.json, as hub folders saved before chat_template.jinja have it)."""
  root = tmp_path_factory.mktemp("hub")
  fast = helpers.save_hub_tokenizer(str(root / "tokenizer"))
  assert len(fast) == VOCAB
  folders = {}
  for family, make in FAMILIES.items():
    torch.manual_seed(0)
    model = helpers.perturb_torch(make())
    model.config.update(dict(eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id))
    folder = root / family
    if family == "qwen2":
      model.to(torch.bfloat16).save_pretrained(folder, max_shard_size="100KB")
    else:
      model.save_pretrained(folder)
    shutil.copytree(root / "tokenizer", folder, dirs_exist_ok=True)
    folders[family] = str(folder)
  template = root / "llama" / "chat_template.jinja"
  config = json.loads((root / "llama" / "tokenizer_config.json").read_text())
  config["chat_template"] = template.read_text()
  (root / "llama" / "tokenizer_config.json").write_text(json.dumps(config))
  template.unlink()
  return folders


def held_out_prompts(fast) -> np.ndarray:
  """Two prompts of 16 tokens from reference topics the tokenizer was not trained on."""
  texts = helpers.reference_topics()[40:42]
  return np.array([fast(text)["input_ids"][:16] for text in texts], np.int32)


def theirs_log_probs(folder: str, tokens):
  model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
  with torch.no_grad():
    return model, log_probs(model(input_ids=torch.tensor(tokens, dtype=torch.long)).logits)


def saved_dtypes(folder: str) -> set:
  """The dtypes of a folder's safetensors files, from their headers."""
  dtypes = set()
  for name in os.listdir(folder):
    if name.endswith(".safetensors"):
      with open(os.path.join(folder, name), "rb") as f:
        header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
      dtypes |= {v["dtype"] for k, v in header.items() if k != "__metadata__"}
  return dtypes


def greedy(model, prompts, new_tokens: int) -> np.ndarray:
  """transformers' greedy continuation of equal-length prompts."""
  with torch.no_grad():
    out = model.generate(
        torch.tensor(prompts, dtype=torch.long),
        do_sample=False,
        max_new_tokens=new_tokens,
        attention_mask=torch.ones(prompts.shape, dtype=torch.long),
    )
  return out.numpy()[:, prompts.shape[1] :]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_hub_folder_converts_to_a_workdir_and_back(family, hub, tmp_path):
  workdir, exported = str(tmp_path / "workdir"), str(tmp_path / "exported")
  assert convert.main([hub[family], workdir, "--to", "orbax"]) == 0
  ckpt = interop.load(workdir)
  config, params, tokenizer = ckpt.model, ckpt.tree(), ckpt.tokenizer
  expected = {"qwen2": ("qkv", False), "qwen3": ("none", True)}.get(family, ("none", False))
  assert (config["biases"], config["qk_norm"]) == expected
  assert config["num_kv_heads"] == 2 and config["tie_embeddings"] == (family == "qwen2")
  assert config.get("head_dim") == (24 if family == "qwen3" else None)
  assert config["param_dtype"] == ("bfloat16" if family == "qwen2" else "float32")
  fast = transformers.AutoTokenizer.from_pretrained(hub[family])
  tokens = held_out_prompts(fast)
  model, theirs = theirs_log_probs(hub[family], tokens)
  ours = log_probs(build_model(config).apply({"params": params}, tokens))
  assert helpers.max_diff(ours, theirs) <= 1e-4
  # Greedy through the KV cache, from the first 6 tokens: the same 10 new tokens.
  prompts = tokens[:, :6]
  want = greedy(model, prompts, 10)
  assert fast.eos_token_id not in want and len(set(want[0].tolist())) > 2  # not a stuck token
  new = sampling.generate(config, params, prompts.tolist(), max_new_tokens=10, temperature=0.0)
  np.testing.assert_array_equal(np.array(new), want)
  # The tokenizer, its special tokens and the chat template, in the workdir's tokenizer folder.
  assert (tokenizer.eos_id, tokenizer.pad_id) == (fast.eos_token_id, fast.pad_token_id)
  assert tokenizer.chat_template == helpers.CHAT_TEMPLATE
  assert os.path.isfile(os.path.join(workdir, "tokenizer", "chat_template.jinja"))

  assert convert.main([workdir, exported, "--to", "hf"]) == 0
  back = transformers.AutoModelForCausalLM.from_pretrained(exported, dtype=torch.float32)
  assert type(back).__name__ == EXPORTED[family]
  assert back.config.head_dim == (getattr(model.config, "head_dim", None) or 64 // 4)  # Qwen2's
  for field in ("rope_parameters", "rms_norm_eps", "tie_word_embeddings"):
    assert getattr(back.config, field) == getattr(model.config, field), field
  assert back.config.eos_token_id == fast.eos_token_id
  with torch.no_grad():
    exported_log_probs = log_probs(back(input_ids=torch.tensor(tokens, dtype=torch.long)).logits)
  np.testing.assert_array_equal(exported_log_probs, theirs)
  theirs_back = back.state_dict()
  for name, value in model.state_dict().items():
    assert torch.equal(theirs_back[name], value), name
  assert saved_dtypes(exported) == {"BF16" if family == "qwen2" else "F32"}  # as they came
  again = transformers.AutoTokenizer.from_pretrained(exported)
  messages = [{"role": "user", "content": "What does the for statement do?"}]
  assert again.apply_chat_template(messages) == fast.apply_chat_template(messages)
  assert (again.eos_token_id, again.pad_token_id) == (fast.eos_token_id, fast.pad_token_id)


def test_gpt2s_format_refuses_a_llama_block(tmp_path):
  config = dict(name="gpt", variant="pico", vocab_size=VOCAB, max_len=16, normalization="rmsnorm")
  ckpt, _ = helpers.init_ours(config, TOKENS)
  with pytest.raises(errors.ConversionError, match="GPT-2's format holds GPT-2's block"):
    interop.save(ckpt, str(tmp_path / "out"), to="hf")
  rope = dict(config, posemb="rope", normalization="layernorm")  # a Llama-family format's
  ckpt, _ = helpers.init_ours(rope, TOKENS)
  with pytest.raises(errors.ConversionError, match="this model sets {'normalization'"):
    interop.save(ckpt, str(tmp_path / "out"), to="hf")


# ---- What ours cannot compute, and tensors that do not fit: one line, exit 2, nothing written ---

YARN = dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=32, rope_theta=1e4)
BAD_CONFIGS = [
    ("mistral", dict(sliding_window=16), ["sliding-window", "max_position_embeddings to 16"]),
    (
        "qwen2",
        dict(use_sliding_window=True, sliding_window=32, max_window_layers=1),
        ["sliding-window", "use_sliding_window to false"],
    ),
    ("llama", dict(rope_parameters=YARN), ["rope_type='yarn'", "whose RoPE is one of"]),
    ("llama", dict(rope_parameters=dict(YARN, rope_type="dynamic")), ["rope_type='dynamic'"]),
    ("qwen3", dict(rope_parameters=dict(YARN, rope_type="longrope")), ["rope_type='longrope'"]),
    ("llama", dict(partial_rotary_factor=0.5), ["partial_rotary_factor=0.5"]),
    ("llama", dict(attention_bias=True), ["attention_bias=true", "without them"]),
    (
        "llama",
        dict(model_type="mixtral", num_local_experts=8, architectures=["MixtralForCausalLM"]),
        ["model_type='mixtral' is a mixture of experts (num_local_experts=8)", "dense model"],
    ),
    ("qwen2", dict(model_type="qwen2_moe"), ["model_type='qwen2_moe' is a mixture of experts"]),
    ("qwen3", dict(model_type="qwen3_moe", num_experts=4), ["mixture of experts (num_experts=4)"]),
    ("llama", dict(n_routed_experts=16), ["model_type='llama' is a mixture of experts"]),
]


def one_error_line(stderr: str) -> str:
  assert "Traceback" not in stderr, stderr
  lines = [line for line in stderr.splitlines() if line.startswith("error:")]
  assert len(lines) == 1, stderr
  return stderr[stderr.index("error:") :]


def test_what_ours_cannot_compute_is_refused_naming_it(hub, tmp_path, capsys):
  for i, (family, changes, expected) in enumerate(BAD_CONFIGS):
    src, dst = tmp_path / f"hub_{i}", tmp_path / f"out_{i}"
    shutil.copytree(hub[family], src)
    config = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**config, **changes}))
    assert convert.main([str(src), str(dst), "--to", "orbax"]) == 2, changes
    error = one_error_line(capsys.readouterr().err)
    for text in expected:
      assert text in error, (text, error)
    assert not dst.exists()


def test_missing_misshapen_and_unexpected_tensors_are_named(hub, tmp_path, capsys):
  from safetensors import numpy as safetensors_np  # pylint: disable=g-import-not-at-top

  src = tmp_path / "hub"
  shutil.copytree(hub["llama"], src)
  weights = str(src / "model.safetensors")
  tensors = safetensors_np.load_file(weights)
  del tensors["model.layers.1.mlp.up_proj.weight"]
  tensors["model.layers.0.self_attn.q_proj.weight"] = np.zeros((64, 60), np.float32)
  tensors["model.layers.0.self_attn.rotary_emb.inv_freq"] = np.zeros(8, np.float32)
  safetensors_np.save_file(tensors, weights, metadata={"format": "pt"})
  assert convert.main([str(src), str(tmp_path / "out"), "--to", "orbax"]) == 2
  error = one_error_line(capsys.readouterr().err)
  source = "in Hugging Face llama checkpoint"
  assert f"missing {source}: model.layers.1.mlp.up_proj.weight" in error
  assert (
      f"misshapen {source}: model.layers.0.self_attn.q_proj.weight (64, 60), the config makes it "
      "(64, 64)" in error
  )
  assert f"unexpected {source}: model.layers.0.self_attn.rotary_emb.inv_freq (8,)" in error
  assert sorted(os.listdir(tmp_path)) == ["hub"]


# ---- Fine-tuning from an imported checkpoint --------------------------------------------------


def finetune_config(imported: str, text: str, steps: int):
  """configs/gpt.py with the imported model's options (a command line sets them as
  --config.model.KEY=VALUE), on held-out text, from `init_from` and its tokenizer."""
  config = tiny_configs.load("gpt", f"dataset=stream:files:{text},runlocal")
  record = interop.load(imported).model
  config.model.update({k: v for k, v in record.items() if k in config.model and k != "max_len"})
  config.init_from = imported  # its tokenizer too
  # The kind the imported tokenizer is saved as (hf_tokenizers), which the resumed run checks
  # the workdir's against.
  config.tokenizer.kind = "byte_bpe"
  config.seq_len, config.total_steps = 32, steps
  config.checkpoint_every, config.eval_every = 2, steps
  return config


@pytest.fixture(scope="module")
def imported_qwen3(hub, tmp_path_factory) -> str:
  """The Qwen3 hub folder converted to a workdir by the convert command."""
  workdir = str(tmp_path_factory.mktemp("imported") / "qwen3")
  assert convert.main([hub["qwen3"], workdir, "--to", "orbax"]) == 0
  return workdir


def test_a_fine_tune_from_an_imported_qwen3_resumes_exactly_and_generates(
    imported_qwen3, tmp_path, capsys
):
  imported, text = imported_qwen3, str(tmp_path / "held_out.txt")
  with open(text, "w", encoding="utf-8") as f:
    f.write("\n".join(helpers.reference_topics()[40:]))  # not what the tokenizer saw
  straight, resumed = tmp_path / "straight", tmp_path / "resumed"
  train.train_and_evaluate(finetune_config(imported, text, 4), str(straight))
  assert "init_from:" not in capsys.readouterr().out  # every param taken as it was
  shutil.copytree(straight, resumed)  # as if stopped after step 2's checkpoint
  shutil.rmtree(resumed / "checkpoints" / "4")
  train.train_and_evaluate(finetune_config(imported, text, 4), str(resumed))
  assert "at step 2." in capsys.readouterr().out
  a, b = tiny_configs.read_state(straight, 4), tiny_configs.read_state(resumed, 4)
  for key in a:
    np.testing.assert_array_equal(b[key], a[key], err_msg=key)
  losses = [r["train_loss"] for r in tests_helpers.read_metrics(straight) if "train_loss" in r]
  assert len(losses) == 4 and all(np.isfinite(losses))
  before, after = interop.load(imported), interop.load(str(straight))
  assert not np.array_equal(after.params["wte/embedding"], before.params["wte/embedding"])

  # It generates: exported, transformers continues a prompt greedily as ours does.
  assert convert.main([str(straight), str(tmp_path / "hf"), "--to", "hf"]) == 0
  theirs = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path / "hf")).eval()
  prompt = after.tokenizer.encode("The for statement")
  with torch.no_grad():
    want = theirs.generate(
        torch.tensor([prompt]),
        do_sample=False,
        max_new_tokens=8,
        attention_mask=torch.ones((1, len(prompt)), dtype=torch.long),
    )[0, len(prompt) :]
  new = sampling.generate(
      after.model, after.tree(), [prompt], max_new_tokens=8, eos_id=after.tokenizer.eos_id
  )[0]
  assert list(new) == want.tolist()


def test_the_lm_eval_adapter_scores_an_imported_qwen3_as_transformers_does(imported_qwen3, hub):
  instance = peers.require("lm_eval.api.instance")
  from vit_jax.evaluate import lm_eval_adapter  # pylint: disable=g-import-not-at-top

  harness = lm_eval_adapter.VitJaxLM(imported_qwen3, batch_size=2)
  pairs = [("The for statement", " is used to iterate"), ("A class definition", " defines it")]
  got = harness.loglikelihood(
      [instance.Instance("loglikelihood", doc={}, arguments=pair, idx=0) for pair in pairs]
  )
  model = transformers.AutoModelForCausalLM.from_pretrained(hub["qwen3"], dtype=torch.float32)
  for (context, continuation), (logprob, _) in zip(pairs, got):
    context_ids, continuation_ids = harness.encode(context), harness.encode(continuation)
    with torch.no_grad():
      logits = model(input_ids=torch.tensor([context_ids + continuation_ids])).logits
    row = log_probs(logits)[0]
    start = len(context_ids) - 1  # the position that predicts the continuation's first token
    want = sum(row[start + i, token] for i, token in enumerate(continuation_ids))
    assert logprob == pytest.approx(want, abs=1e-4), (context, continuation)
