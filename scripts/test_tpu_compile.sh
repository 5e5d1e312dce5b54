#!/usr/bin/env bash
# The TPU compile tests (tests/scale/test_aot_tpu.py) in their own venv, .venv-tpu, with libtpu:
# libtpu's compiler builds the paper recipes' train steps for TPU slices on this CPU machine.
# The main .venv never gets libtpu (with it, JAX looks for a TPU at start-up).
# Usage: scripts/test_tpu_compile.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
if [ ! -x .venv-tpu/bin/python ]; then
  "$python" -m venv .venv-tpu
  .venv-tpu/bin/python -m pip install -q --upgrade pip
fi
stamp=".venv-tpu/.installed-$(sha256sum setup.py | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  jax_version="$(sed -n 's/.*"jax>=\([0-9.]*\),.*/\1/p' setup.py)"
  .venv-tpu/bin/python -m pip install -q -e . "jax[tpu]==${jax_version}" pillow pytest
  touch "$stamp"
fi
JAX_PLATFORMS=cpu exec .venv-tpu/bin/python -m pytest -q -m tpu_compile tests/scale/test_aot_tpu.py "$@"
