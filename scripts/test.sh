#!/usr/bin/env bash
# Quickstart: set up with the test extras, then run the test suite (what CI runs).
# By default tests marked `slow` are left out (each is a longer variant of something the default
# run already checks), and so are those marked `multiprocess` (several processes on one machine's
# 2 cores: scripts/test_multiprocess.sh runs them one at a time, a CI stage of its own) and
# `default_emitters` (programs compared under XLA's default emitters, which the tests' flags
# replace: tests/helpers.py; scripts/test_multiprocess.sh runs them too); pass -m to choose, e.g. scripts/test.sh -m "slow or not slow" (everything) or scripts/test.sh -m slow.
# Other arguments go to pytest, e.g. scripts/test.sh tests/models
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
marker=(-m "not slow and not multiprocess and not default_emitters")
for arg in "$@"; do
  case "$arg" in -m|-m*) marker=() ;; esac
done
exec .venv/bin/python -m pytest -q -n 2 --durations=30 "${marker[@]}" "$@"
