#!/usr/bin/env bash
# Runs a short version of every command the README documents, in an environment holding the base
# install alone (no test extras), and checks that each exits 0 and writes what it should. A
# dependency the commands need but setup.py leaves to the test extras fails here. CI runs it
# before the test suite.
#
#   bash scripts/smoke_base_install.sh        # builds or reuses .venv-base (scripts/setup.sh)
#   VENV=/tmp/venv-base bash scripts/smoke_base_install.sh
#
# Everything it writes goes to a temporary folder (datasets included, via TFDS_DATA_DIR), removed
# at the end. Each command's output is kept there and printed only when the command fails.
set -euo pipefail
cd "$(dirname "$0")/.."
export VENV="${VENV:-.venv-base}"
bash scripts/setup.sh  # the base install: what scripts/train.sh installs
python="$VENV/bin/python"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export TFDS_DATA_DIR="$tmp/tfds"
unset TF_CPP_MIN_LOG_LEVEL VIT_JAX_VERBOSE  # what a user's shell has: the commands quiet TF's logs
# The commands' programs are small and compile more than they run: the tests' XLA flags
# (tests/helpers.py's TEST_XLA_FLAGS: LLVM at level 0, XLA:CPU's older loop emitters), which
# compile them faster; the smoke checks what the commands write, not its last bits.
XLA_FLAGS="$("$python" -c 'from tests import helpers; print(helpers.TEST_XLA_FLAGS)') ${XLA_FLAGS:-}"
export XLA_FLAGS
started=$SECONDS

# check NAME COMMAND...: runs COMMAND with its output in $tmp/NAME.log; stops the smoke on failure.
check() {
  local name="$1"
  shift
  local t0=$SECONDS status=0
  "$@" >"$tmp/$name.log" 2>&1 || status=$?
  if [ "$status" -ne 0 ]; then
    echo "smoke: FAILED: $name (exit $status): $*" >&2
    tail -n 30 "$tmp/$name.log" >&2
    exit 1
  fi
  echo "smoke: ok   $name ($((SECONDS - t0)) s)"
}

# expect FILE...: each exists (a file, or a non-empty folder).
expect() {
  for path in "$@"; do
    if [ ! -s "$path" ] && [ -z "$(ls -A "$path" 2>/dev/null)" ]; then
      echo "smoke: FAILED: $path is missing or empty" >&2
      exit 1
    fi
  done
}

# expect_line NAME TEXT: the output of step NAME has TEXT.
expect_line() {
  if ! grep -qF -- "$2" "$tmp/$1.log"; then
    echo "smoke: FAILED: $1 printed no '$2':" >&2
    tail -n 30 "$tmp/$1.log" >&2
    exit 1
  fi
}

# Quickstart, as the README runs it, with few steps.
check quickstart bash scripts/train.sh --config.total_steps=20 --workdir="$tmp/digits"
expect_line quickstart "Final eval accuracy:"
expect "$tmp/digits/checkpoints" "$tmp/digits/metrics.jsonl"

# Language models: train, then generate.
check gpt "$python" -m vit_jax.main --config=configs/gpt.py:runlocal --workdir="$tmp/gpt"
check generate "$python" -m vit_jax.generate --workdir="$tmp/gpt" --prompt="The module" \
  --max_new_tokens=10
expect_line generate "The module"
# A cooldown branched off a longer run's kept checkpoint (README: branch_from).
schedule=(--config.optimizer.schedule=rsqrt --config.optimizer.cooldown_steps=2)
check long_run "$python" -m vit_jax.main --config=configs/gpt.py:runlocal "${schedule[@]}" \
  --config.total_steps=8 --config.keep_checkpoint_steps="(4,)" --workdir="$tmp/long"
check branch "$python" -m vit_jax.main --config=configs/gpt.py:runlocal "${schedule[@]}" \
  --config.total_steps=6 --config.branch_from="$tmp/long:4" --workdir="$tmp/branch"
expect_line branch "Branched from"
expect "$tmp/long/checkpoints/4" "$tmp/branch/checkpoints/6"
check bert "$python" -m vit_jax.main --config=configs/bert.py:runlocal --workdir="$tmp/bert"
check seq2seq "$python" -m vit_jax.main --config=configs/seq2seq.py:runlocal --workdir="$tmp/s2s"
check generate_beam "$python" -m vit_jax.generate --workdir="$tmp/s2s" --prompt=helloworld \
  --beam_size=4 --max_new_tokens=12

# A token store: text tokenized once by two worker processes, then trained on by index.
check prepare "$python" -m vit_jax.prepare --config=configs/gpt.py:dataset=embedded \
  --output="$tmp/store" --examples_per_shard=200 --workers=2
expect "$tmp/store/store.json"
check gpt_store "$python" -m vit_jax.main --config=configs/gpt.py:dataset=embedded,runlocal \
  --config.token_store="$tmp/store" --workdir="$tmp/gpt_store"

# Checkpoint interop, both ways.
check convert_to_npz "$python" -m vit_jax.convert "$tmp/digits" "$tmp/vit.npz" --to npz
check convert_big_vision "$python" -m vit_jax.convert "$tmp/vit.npz" "$tmp/vit_bv.npz" --to npz \
  --layout big_vision
check convert_from_npz "$python" -m vit_jax.convert "$tmp/vit.npz" "$tmp/from_npz" --to orbax
check convert_to_hf "$python" -m vit_jax.convert "$tmp/bert" "$tmp/hf_bert" --to hf
check convert_from_hf "$python" -m vit_jax.convert "$tmp/hf_bert" "$tmp/from_hf" --to orbax
expect "$tmp/vit.npz" "$tmp/vit_bv.npz" "$tmp/from_npz/checkpoints" \
  "$tmp/hf_bert/model.safetensors" "$tmp/from_hf/checkpoints"

# Evaluation alone: a workdir with its own config, and an imported .npz with a config for the data.
check evaluate "$python" -m vit_jax.evaluate --checkpoint="$tmp/digits" --output="$tmp/evals.json"
expect_line evaluate "eval       accuracy"
check evaluate_npz "$python" -m vit_jax.evaluate --checkpoint="$tmp/vit.npz" --config=configs/vit.py \
  --evals=eval
expect "$tmp/evals.json"

# Inspect and predict, on images the base install draws (Pillow) and on text.
check images "$python" -c "
import os, sys
import numpy as np
from PIL import Image
folder = sys.argv[1]
os.makedirs(folder)
for i in range(3):
  pixels = np.random.default_rng(i).integers(0, 256, (16, 16, 3), dtype=np.uint8)
  Image.fromarray(pixels).save(os.path.join(folder, f'{i}.png'))
" "$tmp/images"
check visualize "$python" -m vit_jax.visualize --checkpoint="$tmp/digits" --image="$tmp/images/0.png" \
  --image="$tmp/images" --output_dir="$tmp/visualize"
check visualize_text "$python" -m vit_jax.visualize --checkpoint="$tmp/gpt" --text="The module" \
  --output_dir="$tmp/visualize_text"
expect "$tmp/visualize/summary.json" "$tmp/visualize/rollout.png" "$tmp/visualize_text/summary.json"
check predict "$python" -m vit_jax.predict --checkpoint="$tmp/digits" --image="$tmp/images" \
  --top_k=3 --output="$tmp/predictions.json"
check predict_text "$python" -m vit_jax.predict --checkpoint="$tmp/bert" \
  --text="The [MASK]odule" --top_k=5
expect "$tmp/predictions.json"

# ImageNet as docs/imagenet.md prepares it: a miniature in the official tar format, prepared by
# TFDS's builder through vit_jax.prepare, then trained, evaluated and predicted.
check imagenet_tars "$python" scripts/imagenet_miniature.py "$tmp/imagenet_tars"
check imagenet_prepare "$python" -m vit_jax.prepare \
  --config=configs/vit.py:dataset=imagenet2012,runlocal --config.data_dir="$tmp/imagenet_tfds" \
  --manual_dir="$tmp/imagenet_tars" --datasets=imagenet2012
expect_line imagenet_prepare "imagenet2012: prepared"
check imagenet_train "$python" -m vit_jax.main --config=configs/vit.py:dataset=imagenet2012,runlocal \
  --config.data_dir="$tmp/imagenet_tfds" --workdir="$tmp/imagenet_run"
expect_line imagenet_train "Final eval accuracy:"
check imagenet_evaluate "$python" -m vit_jax.evaluate --checkpoint="$tmp/imagenet_run"
expect_line imagenet_evaluate "minival"
mkdir -p "$tmp/imagenet_val"
tar -xf "$tmp/imagenet_tars/ILSVRC2012_img_val.tar" -C "$tmp/imagenet_val" \
  ILSVRC2012_val_00000001.JPEG
check imagenet_predict "$python" -m vit_jax.predict --checkpoint="$tmp/imagenet_run" \
  --image="$tmp/imagenet_val/ILSVRC2012_val_00000001.JPEG"
expect_line imagenet_predict "ILSVRC2012_val_00000001.JPEG"

# A two-run sweep through run, collect, fit and plot; and a cluster sweep's command lines.
check sweep "$python" -m vit_jax.sweep all experiments/sweeps/smoke_cpu.py --root="$tmp/sweep"
expect "$tmp/sweep/runs.csv" "$tmp/sweep/evals.csv" "$tmp/sweep/fit.json" \
  "$tmp/sweep/compute.png"
check sweep_commands "$python" -m vit_jax.sweep run experiments/sweeps/vit_i1k_paper.py \
  --root="$tmp/sweep_i1k" --print_commands
expect_line sweep_commands "vit_jax.main"

# No command printed third-party log noise (TF's C++ notices, the absl preamble, orbax warnings),
# the sweep's training runs included.
check quiet "$python" -m tests.quiet "$tmp"/*.log $(find "$tmp/sweep" -name train.log)

echo "smoke: every documented command ran in the base install ($((SECONDS - started)) s)"
