#!/bin/bash
# The OpenDPD reference recipe on the measured DPA_200MHz data set: GRU, hidden 23
# (1,911 parameters), frame 200, stride 1, batch 64, AdamW, lr 5e-3, seed 0, 20 epochs,
# ReduceLROnPlateau as OpenDPD (factor 0.5, patience 5, min 5e-5), gradient clip 200.
# Prints the per-epoch test NMSE and time per epoch; the quality bar is OpenDPD's
# PyTorch run of the same recipe: test NMSE -27.1 dB after 1 epoch, -32.5 dB after 20.
#
# usage: bench/ref_recipe.sh [DISTDPD] [RUN_DIR] [EPOCHS]
#   DISTDPD  the command (default: build/distdpd)
#   RUN_DIR  where to write the run (default: a fresh temporary directory)
#   EPOCHS   default 20
# One core: OPENBLAS_NUM_THREADS=1 unless already set.
set -euo pipefail
cd "$(dirname "$0")/.."
DD=${1:-build/distdpd}
RUN=${2:-$(mktemp -d "${TMPDIR:-/tmp}/ddref.XXXXXX")/run}
EPOCHS=${3:-20}
DATA=../shared/data/opendpd/DPA_200MHz
if [ ! -f "$DATA/spec.json" ]; then
    echo "SKIP: $DATA not found" >&2
    exit 77
fi
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
rm -rf "$RUN"
"$DD" train-pa --data "$DATA" --model gru --hidden 23 --frame 200 --stride 1 --batch 64 \
    --epochs "$EPOCHS" --lr 5e-3 --opt adamw --seed 0 --out "$RUN" --progress lines
echo
echo "epoch  test_nmse_db  val_nmse_db  time_s  eval_time_s  lr"
awk -F'[:,]' '{
    for (i = 1; i < NF; i++) {
        gsub(/[{}" ]/, "", $i)
        v[$i] = $(i + 1)
    }
    printf "%5d  %12.2f  %11.2f  %6.2f  %11.3f  %g\n", v["epoch"], v["test_nmse_db"], v["val_nmse_db"], v["time_s"], v["eval_time_s"], v["lr"]
}' "$RUN/metrics.jsonl"
awk -F'[:,]' '{ for (i = 1; i < NF; i++) { gsub(/[{}" ]/, "", $i); if ($i == "time_s") t += $(i + 1) } } END { printf "mean time per epoch: %.2f s over %d epochs\n", t / NR, NR }' "$RUN/metrics.jsonl"
echo "run directory: $RUN"
