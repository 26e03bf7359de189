#!/usr/bin/env bash
# The reference-recipe benchmark: distdpd against the same recipe in PyTorch on this
# machine, in one run (bench/run.sh calls it; see docs/performance.md).
#
#   bash bench/recipe_bench.sh [BUILD_DIR [OUT_DIR]]     (defaults: build, BUILD_DIR/bench-results)
#
# 1. the single-core sgemm peak of the BLAS in use (and with OpenBLAS's AVX-512 kernel
#    forced, when the CPU has AVX-512): the hardware reference;
# 2. ROUNDS rounds, alternating which tool goes first, of the recipe (gru hidden 23, frame
#    200, stride 1, batch 64, AdamW lr 5e-3) for EPOCHS epochs with seed = round - 1:
#    `distdpd train-pa` and bench/torch_recipe.py (1 thread), the latter started from
#    distdpd's initial parameters and frame order (bench/recipe_export), so both train
#    the same problem; per-epoch time = training + validation/test evaluation, peak RSS
#    (bench/maxrss), test NMSE after every epoch;
# 3. one PyTorch round with 2 threads (both cores of a 2-core machine; BENCH_TWO_THREADS=0
#    skips it);
# 4. throughput of gru 23/28/64, dgru, tcn and resnet through the trainer (bench_train,
#    BENCH_STEPS optimiser steps each, best of 2) against dd_model_flops_per_sample;
# 5. peak RSS of `distdpd train-pa` on simulated data sets of growing size (binary
#    format, frame stride 1000 to keep the epoch short): memory against data size;
# then bench/bench_report.py prints the tables (also OUT_DIR/summary.md).
#
# Data: ../shared/data/opendpd/DPA_200MHz, else a simulated data set of the same size
# (distdpd simulate --signal 10x20 --samples 38400). PyTorch: Debian's /usr/bin/python3
# with torch; without it the PyTorch columns are skipped (said in the report).
# Environment: BENCH_ROUNDS (3), BENCH_EPOCHS (2), BENCH_STEPS (60), BENCH_TWO_THREADS (1),
# BENCH_RSS (1: run step 5), BENCH_RSS_SIZES (samples of step 5's data sets, default
# "384000 3200000 6400000"; the issue's range: "400000 3200000 12800000 50000000", 2 GB of
# disk and about 6 minutes), BENCH_PYTHON (/usr/bin/python3).
# One core: OPENBLAS_NUM_THREADS=1, OMP_NUM_THREADS=1 (torch.set_num_threads(1) too), and
# `--threads 1` for distdpd (its default is every core the process owns).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=${2:-$BUILD/bench-results}
ROUNDS=${BENCH_ROUNDS:-3}
EPOCHS=${BENCH_EPOCHS:-2}
STEPS=${BENCH_STEPS:-60}
TWO=${BENCH_TWO_THREADS:-1}
RSS=${BENCH_RSS:-1}
PY=${BENCH_PYTHON:-/usr/bin/python3}
DD="$BUILD/distdpd"
BIN="$OUT/bin"
if [ ! -x "$DD" ]; then
    echo "recipe_bench: build first ($DD missing): cmake --build $BUILD" >&2
    exit 1
fi
rm -rf "$OUT"
mkdir -p "$OUT" "$BIN"
OUT=$(cd "$OUT" && pwd)
BIN="$OUT/bin"
LIB=$(cd "$BUILD" && pwd)

# helpers, built against the library in BUILD
CC=${CC:-cc}
CFL=(-O2 -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Iinclude)
$CC "${CFL[@]}" bench/recipe_export.c -L"$LIB" -ldistdpd -ldistdpd_rf -Wl,-rpath,"$LIB" -lm -o "$BIN/recipe_export"
$CC "${CFL[@]}" bench/bench_train.c -L"$LIB" -ldistdpd -ldistdpd_rf -Wl,-rpath,"$LIB" -lm -o "$BIN/bench_train"
$CC "${CFL[@]}" bench/maxrss.c -o "$BIN/maxrss"
# shellcheck disable=SC2046
$CC "${CFL[@]}" $(pkg-config --cflags openblas) bench/sgemm_peak.c $(pkg-config --libs openblas) -o "$BIN/sgemm_peak"

export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1

# data
DATA=../shared/data/opendpd/DPA_200MHz
DATA_KIND=measured
if [ ! -f "$DATA/spec.json" ]; then
    echo "recipe_bench: $DATA not found: using a simulated data set of the same size"
    DATA="$OUT/sim"
    DATA_KIND=simulated
    "$DD" simulate --out "$DATA" --signal 10x20 --samples 38400 -q
fi
NTRAIN=$(($(wc -l <"$DATA/train_input.csv") - 1))
FRAMES=$((NTRAIN - 200 + 1))

# PyTorch
TORCH=0
TORCH_VERSION=""
if [ -x "$PY" ] && TORCH_VERSION=$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null); then
    TORCH=1
else
    echo "recipe_bench: PyTorch not found ($PY -c 'import torch' failed): the PyTorch columns are skipped"
fi

load() { cut -d' ' -f1-3 /proc/loadavg; }
# the SIMD path distdpd's kernels take: the CPU's best, lowered by DD_SIMD (src/nn/simd.c)
SIMD=generic
grep -q -m1 ' avx2' /proc/cpuinfo && grep -q -m1 ' fma' /proc/cpuinfo && SIMD=avx2
grep -q -m1 avx512f /proc/cpuinfo && [ "$SIMD" = avx2 ] && SIMD=avx512
case ${DD_SIMD:-} in
generic | 0) SIMD=generic ;;
avx2) [ "$SIMD" = avx512 ] && SIMD=avx2 ;;
esac
{
    echo "{\"date\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\", \"nproc\": $(getconf _NPROCESSORS_ONLN),"
    echo " \"cpu\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')\","
    echo " \"avx512\": $(grep -q -m1 avx512f /proc/cpuinfo && echo 1 || echo 0),"
    echo " \"torch\": $TORCH, \"torch_version\": \"$TORCH_VERSION\", \"data\": \"$DATA\", \"data_kind\": \"$DATA_KIND\","
    echo " \"ntrain\": $NTRAIN, \"frames\": $FRAMES, \"rounds\": $ROUNDS, \"epochs\": $EPOCHS,"
    echo " \"simd\": \"$SIMD\", \"openblas_core\": \"$("$BIN/sgemm_peak" 64 1 | sed 's/.*"core": "\([^"]*\)".*/\1/')\","
    echo " \"load_start\": \"$(load)\"}"
} >"$OUT/machine.json"
echo "machine: $(getconf _NPROCESSORS_ONLN) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'); load $(load)"

# 1. sgemm peak
"$BIN/sgemm_peak" >"$OUT/sgemm.json"
if grep -q -m1 avx512f /proc/cpuinfo; then
    OPENBLAS_CORETYPE=SkylakeX "$BIN/sgemm_peak" >"$OUT/sgemm_avx512.json" || true
fi

# 2. the recipe, alternating
run_dd() { # seed
    echo "  distdpd, seed $1 (load $(load))"
    load >"$OUT/dd_load_$1.txt"
    "$BIN/maxrss" "$OUT/dd_rss_$1.json" "$DD" train-pa --data "$DATA" --model gru --hidden 23 --frame 200 \
        --stride 1 --batch 64 --epochs "$EPOCHS" --lr 5e-3 --opt adamw --seed "$1" --out "$OUT/dd_run_$1" \
        --threads 1 --progress none >"$OUT/dd_$1.log" 2>&1
    cp "$OUT/dd_run_$1/metrics.jsonl" "$OUT/dd_$1.jsonl"
}
run_torch() { # seed threads tag
    echo "  PyTorch ($2 thread(s)), seed $1 (load $(load))"
    load >"$OUT/$3_load_$1.txt"
    OMP_NUM_THREADS=$2 MKL_NUM_THREADS=$2 "$BIN/maxrss" "$OUT/$3_rss_$1.json" "$PY" bench/torch_recipe.py \
        --data "$DATA" --hidden 23 --frame 200 --stride 1 --batch 64 --epochs "$EPOCHS" --lr 5e-3 --seed "$1" \
        --threads "$2" --init "$OUT/init_$1.json" >"$OUT/$3_$1.jsonl" 2>"$OUT/$3_$1.log"
}
echo "recipe: $ROUNDS rounds x $EPOCHS epochs on $DATA ($DATA_KIND, $FRAMES frames)"
for r in $(seq 1 "$ROUNDS"); do
    s=$((r - 1))
    "$BIN/recipe_export" gru 23 "$s" "$FRAMES" "$EPOCHS" "$OUT/init_$s.json"
    if [ "$TORCH" = 1 ] && [ $((r % 2)) = 0 ]; then
        run_torch "$s" 1 torch
        run_dd "$s"
    else
        run_dd "$s"
        [ "$TORCH" = 1 ] && run_torch "$s" 1 torch
    fi
done

# 3. PyTorch on 2 threads, one round
if [ "$TORCH" = 1 ] && [ "$TWO" != 0 ]; then
    run_torch 0 2 torch2
fi

# 4. scaling with model and size
echo "throughput: $STEPS steps per model"
: >"$OUT/scaling.jsonl"
for spec in "gru 23" "gru 28" "gru 64" "dgru 0" "tcn 0" "resnet 0"; do
    # shellcheck disable=SC2086
    set -- $spec
    for rep in 1 2; do
        "$BIN/bench_train" "$DATA" "$1" "$2" "$STEPS" >>"$OUT/scaling.jsonl"
    done
done

# 5. memory against data size (binary data sets are memory-mapped; their pages count)
if [ "$RSS" != 0 ]; then
    SIZES=${BENCH_RSS_SIZES:-384000 3200000 6400000}
    echo "memory: simulated data sets of $SIZES samples"
    : >"$OUT/rss.jsonl"
    for n in $SIZES; do
        "$DD" simulate --out "$OUT/rss_sim_$n" --signal 10x20 --samples "$n" --format bin -q
        "$BIN/maxrss" "$OUT/rss_$n.json" "$DD" train-pa --data "$OUT/rss_sim_$n/data.ddb" --model gru --hidden 23 \
            --epochs 1 --stride 1000 --threads 1 --out "$OUT/rss_run_$n" --progress none >"$OUT/rss_$n.log" 2>&1
        echo "{\"samples\": $n, \"file_bytes\": $(stat -c %s "$OUT/rss_sim_$n/data.ddb"), \"rss\": $(cat "$OUT/rss_$n.json")}" >>"$OUT/rss.jsonl"
        rm -rf "$OUT/rss_sim_$n" "$OUT/rss_run_$n"
    done
fi
echo "load at the end: $(load)"
load >"$OUT/load_end.txt"

# report
if command -v python3 >/dev/null 2>&1; then
    python3 bench/bench_report.py "$OUT" | tee "$OUT/summary.md"
else
    echo "recipe_bench: python3 not found: raw results are in $OUT (*.jsonl, *.json)"
fi
