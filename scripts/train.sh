#!/usr/bin/env bash
# Quickstart: set up, then train a small ViT on the embedded digits dataset (no network needed).
# Extra arguments go to vit_jax.main, e.g. scripts/train.sh --config.total_steps=300
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m vit_jax.main --config=configs/vit.py --workdir=workdirs/digits "$@"
