#!/usr/bin/env bash
# The GPU checks, on a machine with one NVIDIA GPU, each writing under OUT (default /tmp/gpu_check):
#   steps     python -m benchmarks.gpu_steps: ours beside big_vision, nanodo, timm and nanoGPT
#             (compiled and eager), about 5 min; BIG_VISION, NANODO and NANOGPT name the checkouts
#   choices   python -m benchmarks.gpu_choices --time: each speed choice undone, and GPT-2's
#             initialisation with and without the Threefry kernel (compile, run, same bits),
#             about 3 min
#   profile   python -m benchmarks.gpu_profile: kernel time by kind, ours beside the compiled
#             PyTorch peers, about 2 min
#   startup   GPT-2 124M trained by vit_jax.main from the token store STORE for 40 steps at the
#             bare step's batch (16 x 1024, steps' gpt2 row): its
#             time/startup_s, run_info.json's startup_s by part, and tok/s after compile against
#             the bare step's (steps' gpt2 row); python -X importtime's log; about 1.5 min
# Usage: scripts/gpu_check.sh [CHECK ...] (default: all four, in that order). Needs the
# package's dependencies importable (pip install -e ".[cuda]"); PyTorch and timm for the peers.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/gpu_check}"
mkdir -p "$out"
checks=("$@")
[ ${#checks[@]} -eq 0 ] && checks=(steps choices profile startup)
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
for check in "${checks[@]}"; do
  echo "== $check ($(date +%T))"
  case "$check" in
    steps) python3 -m benchmarks.gpu_steps --json "$out/gpu_steps.json" 2>&1 | tee "$out/steps.log" ;;
    choices) python3 -m benchmarks.gpu_choices --time 2>&1 | tee "$out/choices.log" ;;
    profile) python3 -m benchmarks.gpu_profile --json "$out/gpu_profile.json" 2>&1 | tee "$out/profile.log" ;;
    startup)
      if [ -z "${STORE:-}" ]; then
        echo "startup: set STORE to a GPT-2 token store (python -m vit_jax.prepare)"
        continue
      fi
      workdir=$(mktemp -d)/gpt2
      python3 -X importtime -m vit_jax.main --config=configs/gpt.py:dataset=embedded,variant=gpt2 \
        --config.tokenizer.kind=byte_bpe --config.tokenizer.vocab_size=50257 \
        --config.token_store="$STORE" --workdir="$workdir" --config.total_steps=40 \
        --config.batch_size=16 \
        --config.log_every=10 --config.eval_every=1000 --config.checkpoint_every=1000 \
        --config.optimizer.warmup_steps=0 2>"$out/importtime.txt" | tee "$out/startup.log"
      cp "$workdir/metrics.jsonl" "$workdir/run_info.json" "$out/" 2>/dev/null
      ;;
    *) echo "unknown check $check: choose steps, choices, profile or startup" >&2; exit 2 ;;
  esac
done
echo "== done ($(date +%T))"
