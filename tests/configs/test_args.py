"""The command line's `--config.KEY=VALUE`, parsed as vit_jax.main parses it: every optional key
(one a config declares as `placeholder(TYPE)`) takes None, and a key that is not optional
refuses it in one line."""

import glob
import os
import sys

from ml_collections import config_dict
import pytest

from tests import helpers
from vit_jax import main
from vit_jax.config import args

# (config file, key) for every optional integer key of configs/*.py and vit_jax/config/defaults.py
OPTIONAL_INTS = [
    ("vit.py", "eval_max_batches"),
    ("vit.py", "input_shards"),
    ("vit.py", "debug_nan_at_step"),
    ("vit.py", "num_classes"),
    ("vit.py", "evals.eval.max_batches"),
    ("vit.py", "model.width"),
    ("vit.py", "model.depth"),
    ("vit.py", "model.num_heads"),
    ("vit.py", "model.mlp_dim"),
    ("vit.py", "model.representation_size"),
    ("resnet.py", "num_classes"),
    ("resnet.py", "model.width"),
    ("resnet.py", "model.width_factor"),
    ("local_cnn.py", "num_classes"),
    ("gpt.py", "eval_max_batches"),
    ("gpt.py", "tokenizer.vocab_size"),
    ("gpt.py", "model.width"),
    ("gpt.py", "model.depth"),
    ("gpt.py", "model.num_heads"),
    ("gpt.py", "model.num_kv_heads"),
    ("gpt.py", "model.head_dim"),
    ("gpt.py", "model.mlp_dim"),
    ("bert.py", "model.mlp_dim"),
    ("bert_classifier.py", "model.mlp_dim"),
    ("seq2seq.py", "model.num_decoder_layers"),
    ("vit.py", "hf_holdout"),
]


def parse(argv: list[str], monkeypatch):
  """The config vit_jax.main builds from `argv`, or SystemExit."""
  full = ["vit_jax.main", *argv]
  monkeypatch.setattr(sys, "argv", full)  # config_flags reads the overrides from sys.argv
  try:
    main.parse_flags(full)
    return main.FLAGS.config
  finally:  # leave the global flags as a fresh process has them
    for name in [n for n in main.FLAGS if n.startswith("config.")]:
      delattr(main.FLAGS, name)
    main.FLAGS.unparse_flags()


def value(config, key: str):
  for part in key.split("."):
    config = config[part]
  return config


@pytest.mark.parametrize("config_file,key", OPTIONAL_INTS)
@pytest.mark.parametrize("config_arg", ["", ":runlocal"])
def test_optional_integer_keys_take_none_and_numbers(config_file, key, config_arg, monkeypatch):
  config = os.path.join(helpers.ROOT, "configs", config_file) + config_arg
  assert value(parse([f"--config={config}", f"--config.{key}=None"], monkeypatch), key) is None
  assert value(parse([f"--config={config}", f"--config.{key}=5"], monkeypatch), key) == 5


@pytest.mark.parametrize("key", ["model.posemb_init_std", "async_checkpoints"])
def test_optional_float_and_bool_keys_take_none(key, monkeypatch):
  config = os.path.join(helpers.ROOT, "configs", "vit.py")
  assert value(parse([f"--config={config}", f"--config.{key}=None"], monkeypatch), key) is None


def test_none_for_a_key_that_is_not_optional_is_one_error(monkeypatch, capsys):
  config = os.path.join(helpers.ROOT, "configs", "vit.py")
  with pytest.raises(SystemExit) as e:
    parse([f"--config={config}", "--config.seed=None"], monkeypatch)
  assert e.value.code == 2
  assert capsys.readouterr().err.strip() == (
      "error: --config.seed=None: seed is not optional; give it a value."
  )


def test_none_in_lower_case_is_a_string_keys_value(monkeypatch):
  """Llama's block options: no biases, no RoPE scaling."""
  config = os.path.join(helpers.ROOT, "configs", "gpt.py")
  argv = [f"--config={config}", "--config.model.biases=none", "--config.model.rope_scaling=none"]
  parsed = parse(argv, monkeypatch)
  assert (parsed.model.biases, parsed.model.rope_scaling) == ("none", "none")


def optional_ints(config, prefix=""):
  """The keys of `config` declared `placeholder(int)` and None in it."""
  for key, field in config.items(preserve_field_references=True):
    if isinstance(field, config_dict.ConfigDict):
      yield from optional_ints(field, f"{prefix}{key}.")
    elif isinstance(field, config_dict.FieldReference) and field.get_type() is int:
      if field.get() is None:
        yield prefix + key


def test_the_list_covers_every_optional_integer_key():
  listed = {key for _, key in OPTIONAL_INTS}
  for path in glob.glob(os.path.join(helpers.ROOT, "configs", "*.py")):
    for config_arg in ("", "runlocal"):
      for key in optional_ints(args.load_file(path).get_config(config_arg)):
        parts = key.split(".")
        if parts[0] == "evals":  # every evaluator's max_batches is the same kind of key
          key = "evals.eval." + ".".join(parts[2:])
        assert key in listed, (os.path.basename(path), key)


def test_a_number_that_does_not_convert_exactly_is_one_error(monkeypatch, capsys):
  """2.5 for an integer is refused, not truncated to 2: after the config file and as a flag."""
  assert args.parse("depth=4.0,width=1e2", dict(depth=3, width=32)) == dict(depth=4, width=100)
  config = os.path.join(helpers.ROOT, "configs", "local_cnn.py")
  for argv in (
      [f"--config={config}:depth=2.5"],
      [f"--config={config}", "--config.model.depth=2.5"],
  ):
    with pytest.raises(SystemExit) as e:
      parse(argv, monkeypatch)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "depth" in err[0], err
    assert "2.5" in err[0] and "int" in err[0], err


def test_a_bug_of_ours_keeps_its_traceback_and_a_typo_is_one_line(tmp_path, monkeypatch, capsys):
  """An exception raised inside vit_jax, even when a config file called it, is not reported as
  the user's mistake: it propagates (a traceback, exit 1) instead of one `error:` line."""
  config = tmp_path / "calls_us_wrongly.py"
  config.write_text(
      "from vit_jax.config import args\n\n\ndef get_config():\n  return args.parse(5, {})\n"
  )
  with pytest.raises(Exception) as e:  # not SystemExit: that is a BaseException
    parse([f"--config={config}"], monkeypatch)
  assert "split" in str(e.value)
  assert not capsys.readouterr().err.startswith("error:")

  vit = os.path.join(helpers.ROOT, "configs", "vit.py")
  with pytest.raises(SystemExit) as e:
    parse([f"--config={vit}", "--config.modle.depth=3"], monkeypatch)
  assert e.value.code == 2
  assert capsys.readouterr().err.startswith("error:")


def test_config_file_arguments_may_have_spaces_around_their_keys_and_values():
  defaults = {"variant": "B/16", "depth": 12, "runlocal": False}
  assert args.parse(" variant = S/16 , depth= 6, runlocal ", defaults) == {
      "variant": "S/16",
      "depth": 6,
      "runlocal": True,
  }


# Digits that str.isdigit takes: int() refuses the superscript two and reads the Arabic-Indic
# three and the fullwidth four as 3 and 4.
OTHER_DIGITS = ("\u00b2", "\u0663", "\uff14")


@pytest.mark.parametrize("digit", OTHER_DIGITS)
def test_a_number_in_other_digits_than_ascii_is_refused_in_one_line_or_not_a_step(digit, tmp_path):
  """A mixture stage's STEP, branch_from's STEP, profile_steps and a TPU slice's size are one
  ConfigError; a checkpoint folder named so is no step."""
  # pylint: disable=g-import-not-at-top
  from vit_jax import checkpoint
  from vit_jax import errors
  from vit_jax.data.text import mixture
  from vit_jax.tpu_planning import aot
  from vit_jax.training import branch
  from vit_jax.training import profiling

  assert not args.is_digits(digit) and args.is_digits("8000")
  refused = [
      (lambda: mixture.parse_weights(f"web=1;{digit}:web=0.5"), "has no STEP:"),
      (lambda: branch.parse(f"workdirs/run:{digit}"), "must be WORKDIR:STEP"),
      (lambda: profiling.parse_steps(f"1:{digit}"), "must be START:STOP"),
      (lambda: aot.parse_topology(f"v5p-{digit}"), "Unknown TPU topology"),
      (lambda: aot.parse_topology(f"v5p:2x2x{digit}"), "Unknown TPU topology"),
  ]
  for call, message in refused:
    with pytest.raises(errors.ConfigError, match=message):
      call()
  for name in ("2", digit):
    (tmp_path / "checkpoints" / name).mkdir(parents=True)
  assert checkpoint.step_dirs(str(tmp_path)) == [str(tmp_path / "checkpoints" / "2")]
