"""The trainer's CPU XLA flags: appended once, a user's own value wins, this XLA accepts them."""

import os
import subprocess
import sys

from vit_jax import startup


def test_defaults_append_without_overriding(monkeypatch):
  monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
  startup.set_cpu_xla_defaults()
  startup.set_cpu_xla_defaults()
  flags = os.environ["XLA_FLAGS"].split()
  assert flags[0] == "--xla_force_host_platform_device_count=2"
  assert (
      flags.count(
          "--xla_cpu_experimental_ynn_fusion_type=" "-individual_dot,-individual_convolution"
      )
      == 1
  )
  monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_experimental_ynn_fusion_type=individual_dot")
  startup.set_cpu_xla_defaults()
  assert os.environ["XLA_FLAGS"] == "--xla_cpu_experimental_ynn_fusion_type=individual_dot"


def test_this_xla_accepts_them():  # an unknown XLA flag aborts the process
  code = (
      "from vit_jax import startup; startup.set_cpu_xla_defaults(); "
      "import jax.numpy as jnp; "
      "print(float(jnp.dot(jnp.ones((64, 64)), jnp.ones((64, 64)))[0, 0]))"
  )
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  done = subprocess.run(
      [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
  )
  assert done.returncode == 0 and done.stdout.strip() == "64.0", done.stderr[-2000:]
