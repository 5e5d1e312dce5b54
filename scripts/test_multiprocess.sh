#!/usr/bin/env bash
# The tests marked multiprocess: each launches several processes with scripts/launch_local.py
# (meshes that span processes, preemption and damaged checkpoints across processes, host syncs),
# so they run one at a time (-n 0) rather than beside the default suite's workers. The longer
# variants (also marked slow) are left out unless another -m is given, which pytest takes instead.
# Usage: scripts/test_multiprocess.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
exec bash scripts/test.sh -n 0 --durations=0 -m "multiprocess and not slow" "$@"
