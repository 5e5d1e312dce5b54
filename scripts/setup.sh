#!/usr/bin/env bash
# Creates .venv (Python 3.11+) and installs vit_jax into it, editable. Usage: scripts/setup.sh [EXTRAS]
# Skips the install when setup.py has not changed since the last one.
# VENV=DIR picks another environment (CI builds the base install alone in .venv-base).
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
python="${PYTHON:-python3}"
venv="${VENV:-.venv}"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
fi
stamp="$venv/.installed-$(sha256sum setup.py | cut -c1-16)-${extras:-base}"
if [ ! -f "$stamp" ]; then
  target="."
  [ -n "$extras" ] && target=".[$extras]"
  # uv installs what pip would, from the same index, several times faster (parallel downloads,
  # one cache for every venv); pip installs where uv cannot be had. --compile-bytecode: uv
  # otherwise leaves the .pyc files to the first import, which never writes them where
  # PYTHONDONTWRITEBYTECODE is set, and every process then compiles TensorFlow's and JAX's
  # sources again (about 6 s of CPU per process start; pip compiles at install by default).
  if ! { "$venv/bin/python" -m pip install -q uv &&
    "$venv/bin/python" -m uv pip install -q --compile-bytecode --python "$venv/bin/python" -e "$target"; }; then
    "$venv/bin/python" -m pip install -q -e "$target"
  fi
  touch "$stamp"
fi
