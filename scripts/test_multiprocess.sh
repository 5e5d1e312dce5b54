#!/usr/bin/env bash
# The tests that need a pytest session of their own (a CI stage):
# - those marked multiprocess: each launches several processes with scripts/launch_local.py
#   (meshes that span processes, preemption and damaged checkpoints across processes, host
#   syncs), so they run one at a time (-n 0) rather than beside the default suite's workers;
# - those marked default_emitters: they compare two programs bit for bit under XLA:CPU's default
#   emitters, which every other test process replaces with faster-compiling ones
#   (tests/helpers.py), so their session sets VIT_JAX_TEST_DEFAULT_EMITTERS=1.
# The longer variants (also marked slow) are left out unless another -m is given, which pytest
# takes instead. Both sessions always run; the exit status is the first failing one's (a session
# whose selection is empty, pytest's 5, counts as passed: arguments may name one kind only).
# Usage: scripts/test_multiprocess.sh [pytest args]
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
bash scripts/test.sh -n 0 --durations=0 -m "multiprocess and not slow" "$@" || status=$?
second=0
VIT_JAX_TEST_DEFAULT_EMITTERS=1 bash scripts/test.sh -n 0 --durations=0 \
  -m "default_emitters and not slow" "$@" || second=$?
[ "$status" -eq 5 ] && status=0
[ "$second" -eq 5 ] && second=0
[ "$status" -ne 0 ] && exit "$status"
exit "$second"
