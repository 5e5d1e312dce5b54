"""tests/peers.py: a missing test peer skips locally and fails under CI, naming the install."""

import pytest

from tests import peers

MISSING = "vit_jax_no_such_peer"


def test_present_peer_is_returned():
  assert peers.require("json").dumps([1]) == "[1]"


def test_missing_peer_skips_outside_ci(monkeypatch):
  monkeypatch.delenv("CI", raising=False)
  with pytest.raises(pytest.skip.Exception, match=f"{MISSING}.*pip install"):
    peers.require(MISSING)


@pytest.mark.parametrize("value", ["true", "1"])
def test_missing_peer_fails_in_ci(monkeypatch, value):
  monkeypatch.setenv("CI", value)
  with pytest.raises(pytest.fail.Exception, match=f"CI needs every test peer.*{MISSING}.*pip"):
    peers.require(MISSING)


def test_ci_false_is_not_ci(monkeypatch):
  monkeypatch.setenv("CI", "false")
  assert not peers.in_ci()
