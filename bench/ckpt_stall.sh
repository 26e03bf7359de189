#!/usr/bin/env bash
# How long a checkpoint blocks the training steps: asynchronous writing (the default: the
# step loop takes a snapshot, a background thread writes it) against synchronous writing
# (DISTDPD_CKPT_SYNC=1: the step loop writes, fsyncs and renames itself), on a large
# model, one process (docs/performance.md, "Checkpoint stall"; docs/checkpoints.md).
#
#   bash bench/ckpt_stall.sh [BUILD_DIR [OUT_DIR]]     (defaults: build, BUILD_DIR/ckpt-stall)
#
# Trains CS_MODEL (default resnet --hidden 256 --layers 16) for one epoch (about 40
# steps) with a checkpoint every CS_EVERY steps (default 5), once each way,
# and prints per checkpoint: the step loop's stall (seconds it was blocked: snapshot +
# waiting for the previous write) with asynchronous writing, the background write time,
# and the stall with synchronous writing, side by side; then the checkpoint size, the
# median of each column and the median step time. The run directory is on OUT_DIR's file
# system (fsync cost depends on it). By hand, not part of `make bench` (about a minute).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=${2:-$BUILD/ckpt-stall}
MODEL=${CS_MODEL:-resnet --hidden 256 --layers 16}
EVERY=${CS_EVERY:-5}
CLI=$BUILD/distdpd
export OPENBLAS_NUM_THREADS=1
if [ ! -x "$CLI" ]; then echo "no $CLI: build first (make build)" >&2; exit 1; fi
rm -rf "$OUT"
mkdir -p "$OUT"
"$CLI" simulate --out "$OUT/data" --samples 12000 -q
# frame 50, batch 16, stride CS_STRIDE (default 11): about 40 steps on the 12000-sample
# simulated data set
STRIDE=${CS_STRIDE:-11}
COMMON=(--data "$OUT/data" --model ${MODEL} --frame 50 --stride "$STRIDE" --batch 16 --epochs 1 --no-report
    --ckpt-every-steps "$EVERY" --progress none -v -v)

echo "processor: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores; $(date -u +%Y-%m-%d)"
echo "file system of $OUT: $(df -T "$OUT" | awk 'NR == 2 { print $2 }')"
echo "model: $MODEL; checkpoint every $EVERY steps"
"$CLI" train-pa "${COMMON[@]}" --out "$OUT/async" 2>"$OUT/async.log" >/dev/null
DISTDPD_CKPT_SYNC=1 "$CLI" train-pa "${COMMON[@]}" --out "$OUT/sync" 2>"$OUT/sync.log" >/dev/null
steps=$(grep -o '"step":[0-9]*' "$OUT/async/metrics.jsonl" | head -n 1 | cut -d: -f2)
secs=$(grep -o '"time_s":[0-9.e+-]*' "$OUT/async/metrics.jsonl" | head -n 1 | cut -d: -f2)
echo "checkpoint size: $(stat -c %s "$OUT/async/last.ckpt") bytes; $steps steps, $(awk -v t="$secs" -v n="$steps" 'BEGIN { printf "%.1f", 1e3 * t / n }') ms per step (async run, checkpoints included)"
echo
stalls() { sed -n 's/.*checkpoint at step \([0-9]*\): the step loop waited \([0-9.]*\) s.*/\1 \2/p' "$1"; }
writes() { sed -n 's/.*checkpoint write finished in the background: \([0-9.]*\) s.*/\1/p' "$1"; }
paste -d' ' <(stalls "$OUT/async.log") <(writes "$OUT/async.log") <(stalls "$OUT/sync.log" | cut -d' ' -f2) >"$OUT/table.txt"
echo "| step | stall, async (ms) | background write (ms) | stall, sync (ms) |"
echo "|---:|---:|---:|---:|"
awk '{ printf "| %d | %.2f | %.2f | %.2f |\n", $1, 1e3 * $2, 1e3 * $3, 1e3 * $4 }' "$OUT/table.txt"
med() { sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "nan"; else print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
echo "| median | $(cut -d' ' -f2 "$OUT/table.txt" | med | awk '{ printf "%.2f", 1e3 * $1 }') | $(cut -d' ' -f3 "$OUT/table.txt" | med | awk '{ printf "%.2f", 1e3 * $1 }') | $(cut -d' ' -f4 "$OUT/table.txt" | med | awk '{ printf "%.2f", 1e3 * $1 }') |"
