"""Our commands print only our lines: no TF C++ notices, absl preamble or orbax warnings.

The commands run in subprocesses with the environment a user has (no TF_CPP_MIN_LOG_LEVEL).
Every documented command's whole output is checked the same way on the base install, where
scripts/smoke_base_install.sh runs them (tests/quiet.py).
"""

import os
import subprocess
import sys

from tests import quiet

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(args, **env):
  base = {
      k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "VIT_JAX_VERBOSE")
  }
  return subprocess.run(
      [sys.executable, *args],
      env=dict(base, PYTHONPATH=ROOT, **env),
      capture_output=True,
      text=True,
      timeout=600,
      cwd=ROOT,
  )


def assert_quiet(result):
  noise = quiet.noisy_lines(result.stdout + result.stderr)
  assert not noise, f"noise {noise} in:\n{result.stdout}\n{result.stderr}"


LOG_BOTH = (
    "from vit_jax import startup; startup.quiet_startup(); from absl import logging; "
    "logging.warning('library warning'); logging.error('library error')"
)


def test_quiet_startup_keeps_errors_and_hides_warnings():
  result = run(["-c", LOG_BOTH])
  assert result.returncode == 0, result.stderr
  assert "library error" in result.stderr and "library warning" not in result.stderr


def test_verbose_env_keeps_library_warnings():
  result = run(["-c", LOG_BOTH], VIT_JAX_VERBOSE="1")
  assert "library error" in result.stderr and "library warning" in result.stderr


def test_bad_flag_is_one_clear_error():
  result = run(["-m", "vit_jax.generate", "--workdir=w", "--prompt=hi", "--tempreature=0"])
  assert result.returncode != 0 and "tempreature" in result.stderr
  assert_quiet(result)
