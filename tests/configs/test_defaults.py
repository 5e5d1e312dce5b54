"""Every config holds the keys config/defaults.py gives, so the code reads them as `config.key`: a
config that lacks one is refused, and a workdir's older config.json gets the keys added since."""

import glob

import pytest

from tests import helpers
from vit_jax import errors
from vit_jax.config import checks
from vit_jax.config import defaults


@pytest.mark.parametrize("path", sorted(glob.glob("configs/*.py", root_dir=helpers.ROOT)))
def test_every_config_holds_the_shared_keys(path):
  assert checks.missing_keys(helpers.repo_file(path).get_config()) == []


def test_a_config_without_a_shared_key_is_refused_naming_it():
  config = helpers.vit_config()
  del config.optimizer["eps"]
  del config["log_internals"]
  with pytest.raises(errors.ConfigError, match=r"lacks log_internals, optimizer\.eps"):
    checks.validate_config(config)


def test_an_older_saved_config_gets_the_keys_added_since():
  saved = {"task": "image_classification", "optimizer": {"lr": 0.5}, "augment": {"flip": False}}
  config = defaults.from_saved(saved)
  assert config["optimizer"]["lr"] == 0.5 and config["optimizer"]["eps"] == 1e-8
  assert config["augment"] == {"flip": False}  # not a shared key: as saved
  assert (config["log_internals"], config["loss"], config["eval_view"]) == (
      False,
      "softmax_xent",
      "crop",
  )
  # What the image sources read (data.read_options): undecodable images were skipped.
  assert config["bad_images"] == "skip"
  assert "loss" not in defaults.from_saved({"task": "causal_lm"})
