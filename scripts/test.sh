#!/usr/bin/env bash
# Quickstart: set up with the test extras, then run the whole test suite.
# Extra arguments go to pytest, e.g. scripts/test.sh -m "not slow" tests/models
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
exec .venv/bin/python -m pytest -q -n 2 --durations=15 "$@"
