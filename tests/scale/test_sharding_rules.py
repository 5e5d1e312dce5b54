"""Partitioning rules (pure functions of shapes; no devices needed beyond the host)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_jax.models import build_model
from vit_jax.training import mesh as mesh_lib


class FakeMesh:

  def __init__(self, **shape):
    self.shape = {"data": 1, "fsdp": 1, "model": 1, **shape}


@pytest.mark.parametrize(
    "path,shape,fsdp,model,expected",
    [
        (
            "Transformer/encoderblock_0/MultiHeadDotProductAttention_1/query/kernel",
            (384, 6, 64),
            4,
            2,
            ("fsdp", "model", None),
        ),
        (
            "Transformer/encoderblock_0/MultiHeadDotProductAttention_1/out/kernel",
            (6, 64, 384),
            4,
            2,
            ("model", None, "fsdp"),
        ),
        (
            "Transformer/encoderblock_0/MlpBlock_3/Dense_0/kernel",
            (384, 1536),
            4,
            2,
            ("fsdp", "model"),
        ),
        (
            "Transformer/encoderblock_0/MlpBlock_3/Dense_1/kernel",
            (1536, 384),
            4,
            2,
            ("model", "fsdp"),
        ),
        ("Transformer/encoderblock_0/LayerNorm_0/scale", (384,), 4, 2, ()),  # small: replicated
        ("wte/embedding", (50257, 768), 4, 2, (None, "fsdp")),  # 50257 is odd: not split by model
        # Optimizer state follows its parameter; scanned stacks get a leading unsharded layer axis.
        (
            "1/0/mu/Transformer/encoderblock/layers/block/MlpBlock_3/Dense_0/kernel",
            (12, 384, 1536),
            4,
            2,
            (None, "fsdp", "model"),
        ),
    ],
)
def test_rules(path, shape, fsdp, model, expected):
  spec = mesh_lib.spec_for(path, shape, FakeMesh(fsdp=fsdp, model=model))
  assert tuple(spec) == expected


def test_parse_mesh():
  assert mesh_lib.parse_mesh("data:2,fsdp:-1", 8) == {"dcn": 1, "data": 2, "fsdp": 4, "model": 1}
  assert mesh_lib.parse_mesh("data:-1", 1) == {"dcn": 1, "data": 1, "fsdp": 1, "model": 1}
  # An axis left out: data takes the devices the others leave (model:4 is data:2,model:4).
  assert mesh_lib.parse_mesh("model:4", 8) == mesh_lib.parse_mesh("data:2,model:4", 8)
  assert mesh_lib.parse_mesh("model:4", 8) == {"dcn": 1, "data": 2, "fsdp": 1, "model": 4}
  # Multi-slice: dcn is the slice count, the other axes split each slice.
  assert mesh_lib.parse_mesh("fsdp:-1", 8, num_slices=2) == {
      "dcn": 2,
      "data": 1,
      "fsdp": 4,
      "model": 1,
  }
  with pytest.raises(ValueError, match="dcn:4 but the devices form 2 slice"):
    mesh_lib.parse_mesh("dcn:4,data:-1", 8, num_slices=2)
  with pytest.raises(ValueError, match="Unknown mesh axis 'dta'"):
    mesh_lib.parse_mesh("dta:2", 2)
  with pytest.raises(ValueError, match="has 6 slots but there are 8 devices"):
    mesh_lib.parse_mesh("data:2,model:3", 8)


def test_every_vit_and_gpt_weight_matrix_has_a_rule():
  """Large 2-D+ weights of the models must shard; a new layer without a rule would not."""
  for cfg, inputs in [
      ({"name": "vit", "variant": "S/16", "num_classes": 10}, jnp.zeros((1, 32, 32, 3))),
      (
          {"name": "gpt", "variant": "gpt2", "vocab_size": 512, "max_len": 64},
          jnp.zeros((1, 8), jnp.int32),
      ),
  ]:
    params = jax.eval_shape(lambda: build_model(cfg).init(jax.random.PRNGKey(0), inputs))
    for path, leaf in jax.tree_util.tree_flatten_with_path(params["params"])[0]:
      name = mesh_lib.path_string(path)
      if leaf.ndim >= 2 and np.prod(leaf.shape) >= mesh_lib.MIN_SHARDED_SIZE:
        assert any(a is not None for a in mesh_lib.logical_axes(name, leaf.ndim)), name


FAMILIES = [
    ({"name": "vit", "variant": "S/16", "num_classes": 10}, (jnp.zeros((1, 32, 32, 3)),)),
    (
        {"name": "gpt", "variant": "gpt2", "vocab_size": 512, "max_len": 64},
        (jnp.zeros((1, 8), int),),
    ),
    (  # Llama's block: a gated MLP and an untied LM head
        {"name": "gpt", "variant": "pico", "vocab_size": 512, "max_len": 64, "width": 256}
        | {"gated_mlp": True, "tie_embeddings": False, "num_kv_heads": 2},
        (jnp.zeros((1, 8), int),),
    ),
    (
        {"name": "bert_classifier", "variant": "base", "vocab_size": 512, "max_len": 64},
        (jnp.zeros((1, 8), int),),
    ),
    ({"name": "resnet", "variant": "50x1", "num_classes": 10}, (jnp.zeros((1, 32, 32, 3)),)),
    ({"name": "mixer", "variant": "S/16", "num_classes": 10}, (jnp.zeros((1, 32, 32, 3)),)),
    (
        {
            "name": "seq2seq",
            "vocab_size": 512,
            "width": 256,
            "num_layers": 1,
            "num_heads": 4,
            "mlp_dim": 512,
            "max_len": 16,
        },
        (jnp.zeros((1, 8), int),) * 2,
    ),
]


@pytest.mark.parametrize(
    "cfg,inputs", FAMILIES, ids=[c["name"] + "_gated" * c.get("gated_mlp", 0) for c, _ in FAMILIES]
)
def test_every_large_parameter_of_the_models_has_a_rule(cfg, inputs):
  params = jax.eval_shape(lambda: build_model(cfg).init(jax.random.PRNGKey(0), *inputs))
  assert mesh_lib.unmatched_params(params["params"], FakeMesh(fsdp=2, model=2).shape) == []


def test_a_parameter_no_rule_matches_is_named_on_a_sharding_mesh(capsys):
  params = {
      "Transformer/encoderblock_0/MlpBlock_3/Dense_0": {"kernel": np.zeros((64, 256))},
      "new_adapter": {"kernel": np.zeros((64, 256)), "bias": np.zeros(256)},  # the bias is small
  }
  mesh_lib.warn_unmatched(params, FakeMesh(fsdp=2))
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "1 parameters match no sharding rule" in err
  assert "new_adapter/kernel" in err and "RULES in vit_jax/training/mesh.py" in err
  mesh_lib.warn_unmatched(params, FakeMesh(data=8))  # data parallel: everything is replicated
  assert not capsys.readouterr().err


def test_wide_norms_are_replicated_on_purpose():
  """An 8B decoder's norms are 4,096 wide, as large as a tensor worth sharding: a rule replicates
  them, so a sharding mesh neither splits nor warns about them."""
  params = {
      "decoder/encoder_norm": {"scale": np.zeros(4096)},
      "decoder/h/layers/block/LayerNorm_0": {"scale": np.zeros((32, 4096))},  # scanned
      "decoder/h_0/MultiHeadDotProductAttention_1/query_norm": {"scale": np.zeros(4096)},
  }
  assert mesh_lib.unmatched_params(params, FakeMesh(fsdp=2, model=2).shape) == []
  mesh = FakeMesh(fsdp=2, model=2)
  assert tuple(mesh_lib.spec_for("decoder/encoder_norm/scale", (4096,), mesh)) == (None,)
