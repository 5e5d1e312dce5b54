#!/usr/bin/env bash
# The TPU compile tests (marked tpu_compile: the paper recipes' train steps in
# tests/scale/test_aot_tpu.py, the models' splash-attention steps in
# tests/models/test_attention_by_platform.py) in their own venv, .venv-tpu, with libtpu, whose
# compiler builds train steps for TPU slices on this CPU machine.
# The main .venv never gets libtpu (with it, JAX looks for a TPU at start-up).
# Usage: scripts/test_tpu_compile.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-tpu bash scripts/setup.sh tpu
JAX_PLATFORMS=cpu exec .venv-tpu/bin/python -m pytest -q -rP -m tpu_compile --durations=0 tests/scale/test_aot_tpu.py \
  tests/models/test_attention_by_platform.py "$@"
