#!/usr/bin/env bash
# Checks formatting (pyink) and lint (ruff) of the whole tree; changes no file.
# Settings: pyproject.toml. Both checks always run; exits 1 if either finds something.
# To apply the fixes they can make (F401, E501 and E741 findings need a person):
#   .venv/bin/ruff check --fix . && .venv/bin/pyink .
# Needs the test extras (bash scripts/setup.sh test). PYTHON=... picks another interpreter.
set -uo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-.venv/bin/python}"
status=0
echo "lint: pyink --check (format)"
"$python" -m pyink --check . || status=1
echo "lint: ruff check"
"$python" -m ruff check . || status=1
if [ "$status" -ne 0 ]; then
  echo "lint: FAILED (see above; the command to apply fixes is at the top of scripts/lint.sh)" >&2
fi
exit "$status"
