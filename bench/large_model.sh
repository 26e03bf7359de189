#!/usr/bin/env bash
# Learning curve of a large model on DPA_200MHz against the default small model, one
# core (docs/performance.md, "Large models"). By hand, not part of `make bench` (about
# 12 minutes with the defaults).
#
#   bash bench/large_model.sh [BUILD_DIR [OUT_DIR]]     (defaults: build, BUILD_DIR/large-model)
#
# Trains LM_MODEL (default resnet hidden 512, 8 blocks: 8.4 M parameters) with AdamW at
# LM_LR (default 3e-4; the recipe's 5e-3 overshoots at this width) and the default gru
# (hidden 23, 1,911 parameters, the recipe's lr 5e-3) on the same frames: stride
# LM_STRIDE (25), batch LM_BATCH (16), LM_EPOCHS (10) epochs, seed 0, frame 200. Prints
# the processor, the date and one markdown table per model: epoch, train loss,
# validation / test NMSE, training seconds per epoch (evaluation apart) and GFLOP/s
# (dd_model_flops_per_sample forward + backward x training samples / training time).
# Environment: DD_DATA (default ../shared/data/opendpd/DPA_200MHz from the source root),
# LM_MODEL, LM_LR, LM_STRIDE, LM_BATCH, LM_EPOCHS, LM_SMALL (default "gru"),
# LM_SMALL_LR (5e-3), LM_THREADS (train-pa's --threads; unset: its default, the cores the
# process owns; OPENBLAS_NUM_THREADS=1 keeps OpenBLAS on one thread, and since
# 2026-12-02 the large model's sgemm products run in panels on those threads, with the
# numbers of one thread).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=${2:-$BUILD/large-model}
DATA=${DD_DATA:-../shared/data/opendpd/DPA_200MHz}
MODEL=${LM_MODEL:-resnet --hidden 512 --layers 8}
LR=${LM_LR:-3e-4}
STRIDE=${LM_STRIDE:-25}
BATCH=${LM_BATCH:-16}
EPOCHS=${LM_EPOCHS:-10}
SMALL=${LM_SMALL:-gru}
SMALL_LR=${LM_SMALL_LR:-5e-3}
FRAME=200
CLI=$BUILD/distdpd
export OPENBLAS_NUM_THREADS=1

if [ ! -x "$CLI" ]; then echo "no $CLI: build first (make build)" >&2; exit 1; fi
if [ ! -f "$DATA/train_input.csv" ]; then echo "no data set at $DATA (set DD_DATA)" >&2; exit 1; fi
mkdir -p "$OUT"

# training samples per epoch: frames of FRAME samples every STRIDE samples of the
# training split (the trainer's framing: floor((N - F) / S) + 1 frames)
N=$(($(wc -l <"$DATA/train_input.csv") - 1))
FRAMES=$(((N - FRAME) / STRIDE + 1))

echo "processor: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores; $(date -u +%Y-%m-%d)"
echo "data: $DATA ($N training samples); stride $STRIDE -> $FRAMES frames of $FRAME per epoch, batch $BATCH"

run_one() { # TAG LR MODEL...
    local tag=$1 lr=$2
    shift 2
    local dir=$OUT/$tag
    rm -rf "$dir"
    local flops # the model's (the first pair; the stages follow)
    flops=$("$CLI" models --model "$@" --json | tr -d ' \n' | grep -o '"flops_forward":[^,]*,"flops_backward":[^,}]*' |
        head -n 1 | sed 's/"flops_forward":\(.*\),"flops_backward":\(.*\)/\1 \2/')
    local desc
    desc=$("$CLI" models --model "$@" --json | tr -d '\n' | sed -n 's/.*"describe":"\([^"]*\)".*/\1/p')
    "$CLI" train-pa --data "$DATA" --model "$@" --stride "$STRIDE" --batch "$BATCH" --epochs "$EPOCHS" \
        --lr "$lr" --seed 0 --no-report --progress lines ${LM_THREADS:+--threads "$LM_THREADS"} --out "$dir" \
        >"$OUT/$tag.log" 2>&1
    echo
    echo "### $desc, AdamW lr $lr"
    echo
    echo "| epoch | train loss | val NMSE (dB) | test NMSE (dB) | train s/epoch | eval s | GFLOP/s |"
    echo "|---|---|---|---|---|---|---|"
    python3 - "$dir/metrics.jsonl" $flops "$FRAMES" "$FRAME" <<'EOF'
import json, sys
path, ffwd, fbwd, frames, frame = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
for line in open(path):
    r = json.loads(line)
    g = (ffwd + fbwd) * frames * frame / r["time_s"] / 1e9
    print("| %d | %.4g | %.2f | %.2f | %.3g | %.3g | %.1f |" % (r["epoch"], r["train_loss"], r["val_nmse_db"],
          r["test_nmse_db"], r["time_s"], r["eval_time_s"], g))
EOF
}

# shellcheck disable=SC2086
run_one large "$LR" $MODEL
run_one small "$SMALL_LR" "$SMALL"
