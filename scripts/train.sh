#!/usr/bin/env bash
# Quickstart: set up, then train a small ViT on the embedded digits dataset (no network needed).
# Extra arguments go to vit_jax.main, e.g. scripts/train.sh --config.total_steps=300
# VENV=DIR trains in another environment (as scripts/setup.sh takes it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${VENV:-.venv}/bin/python" -m vit_jax.main --config=configs/vit.py --workdir=workdirs/digits "$@"
