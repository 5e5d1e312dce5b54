#!/usr/bin/env bash
# The tests marked multiprocess: each launches several processes with scripts/launch_local.py
# (meshes that span processes, preemption and damaged checkpoints across processes, host syncs),
# so they run one at a time rather than beside the default suite's workers. The longer variants
# (also marked slow) are left out unless -m is given.
# Usage: scripts/test_multiprocess.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
marker=(-m "multiprocess and not slow")
for arg in "$@"; do
  case "$arg" in -m|-m*) marker=() ;; esac
done
exec .venv/bin/python -m pytest -q --durations=0 "${marker[@]}" "$@"
