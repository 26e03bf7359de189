#!/usr/bin/env bash
# Evaluation memory against data size (issue 17): peak RSS of `distdpd eval` on
# simulated data sets in the memory-mapped binary format (docs/formats.md), from 0.4 M to
# 50 M samples, and its growth per byte of data (target: about 1 byte per byte beyond a
# fixed overhead; the mapped data set itself is that byte).
#
#   bash bench/eval_memory.sh            # 0.4, 2, 10 and 50 M samples
#   EVAL_MEM_SIZES="400000 2000000" bash bench/eval_memory.sh
#
# Disk: 16 bytes a sample (complex64 input and output): 6.4 MB, 32 MB, 160 MB and 800 MB;
# one data set at a time is on disk (each is deleted after its run). Time: about 7 minutes
# for the four sizes on a loaded 2-core machine (the 50 M evaluation, 20 M samples of val
# and test through the model, 106 s of it). The run evaluated is a GRU hidden 23 trained one epoch
# (stride 1000) on the smallest set; `distdpd eval` builds the trainer's evaluation (the
# same code as the validation and test evaluation of train-pa / train-dpd), nperseg 32768
# (the simulated presets'). Peak RSS from /usr/bin/time -v.
# Environment: EVAL_MEM_SIZES, EVAL_MEM_OUT (work directory, default a mktemp -d),
# BUILD (build directory, default build).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
DD=$BUILD/distdpd
SIZES=${EVAL_MEM_SIZES:-400000 2000000 10000000 50000000}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
[ -x "$DD" ] || { echo "eval_memory.sh: $DD not built (make build)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "eval_memory.sh: /usr/bin/time missing (apt-get install time)" >&2; exit 1; }
OUT=${EVAL_MEM_OUT:-$(mktemp -d /tmp/dd_eval_memory.XXXXXX)}
mkdir -p "$OUT"
trap 'rm -rf "$OUT"/sim_* "$OUT"/run' EXIT

echo "processor: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores; $(date -u +%Y-%m-%dT%H:%M:%SZ); load average $(cut -d' ' -f1-3 /proc/loadavg)"
first=${SIZES%% *}
"$DD" simulate --out "$OUT/sim_train" --signal 10x20 --samples "$first" --format bin -q
"$DD" train-pa --data "$OUT/sim_train/data.ddb" --model gru --hidden 23 --epochs 1 --stride 1000 \
    --out "$OUT/run" --progress none -q
rm -rf "$OUT/sim_train"

printf '| samples | data set (MB) | peak RSS (MB) | RSS growth / data growth (from the previous row) | eval s |\n'
printf '|---|---|---|---|---|\n'
prev_d="" prev_r="" first_d="" first_r=""
for n in $SIZES; do
    d="$OUT/sim_$n"
    "$DD" simulate --out "$d" --signal 10x20 --samples "$n" --format bin -q
    bytes=$(stat -c %s "$d/data.ddb")
    /usr/bin/time -v "$DD" eval --run "$OUT/run" --data "$d/data.ddb" --json >"$OUT/eval_$n.json" 2>"$OUT/time_$n.txt"
    rss_kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$OUT/time_$n.txt")
    secs=$(sed -n 's/.*"eval_time_s":\([0-9.]*\).*/\1/p' "$OUT/eval_$n.json")
    rss=$((rss_kb * 1024))
    slope=""
    if [ -n "$prev_d" ]; then slope=$(awk -v r="$rss" -v pr="$prev_r" -v d="$bytes" -v pd="$prev_d" 'BEGIN { printf "%.2f", (r - pr) / (d - pd) }'); fi
    awk -v n="$n" -v d="$bytes" -v r="$rss" -v s="$slope" -v t="$secs" \
        'BEGIN { printf "| %d | %.1f | %.1f | %s | %.2f |\n", n, d / 1e6, r / 1e6, s, t }'
    [ -n "$first_d" ] || { first_d=$bytes; first_r=$rss; }
    prev_d=$bytes prev_r=$rss
    rm -rf "$d"
done
if [ "$prev_d" != "$first_d" ]; then
    awk -v r="$prev_r" -v fr="$first_r" -v d="$prev_d" -v fd="$first_d" 'BEGIN {
        s = (r - fr) / (d - fd); o = fr - s * fd;
        printf "slope (first to last row): %.2f bytes of peak RSS per byte of data (target <= ~1), fixed overhead %.1f MB: %s\n",
               s, o / 1e6, s <= 1.1 ? "met" : "NOT met" }'
fi
