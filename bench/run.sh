#!/usr/bin/env bash
# `make bench`: every benchmark of distdpd, by hand (never a ctest test: timings are
# noisy). Prints ratios and tables, not just times; see docs/performance.md.
#
#   bash bench/run.sh [BUILD_DIR]        (default build; the library and command built there)
#
# 1. bench/recipe_bench.sh: the reference recipe, distdpd against PyTorch on this machine
#    (median epoch time and speed-up, FLOPs, GFLOP/s against the sgemm peak, test NMSE
#    after the same epochs, peak RSS against data size), and throughput by model;
#    results and summary.md in BUILD_DIR/bench-results.
# 1b. bench/simd_bench.sh (BENCH_SIMD=0 skips it; ~2 min): the processor, its SIMD paths,
#    OpenBLAS's core and bench/uarch_probe's issue rates; per path (AVX2 forced on AVX-512
#    machines, with OpenBLAS's Haswell kernel) the sgemm peak and gru 23 / tcn / resnet
#    512 x 8 / hammerstein 1024 x 8 GFLOP/s against the targets (50 % of peak, tcn = gru,
#    60 % of peak).
# 1c. bench/threads_bench.sh (BENCH_THREADS=0 skips it; ~1.5 min): the recipe at 1 rank x 1
#    thread, 1 x 2 threads (passive and active waiting), 2 ranks x 1 thread: speed-up
#    against 1.7x, equal losses; resnet 512 x 8 at 1 and 2 threads (BENCH_THREADS_LARGE).
# 2. bench/allreduce.sh: allreduce latency and bus bandwidth at 2 and 4 ranks
#    (up to BENCH_ALLREDUCE_MAX bytes, default 16 MB). BENCH_ALLREDUCE=0 skips it.
# 3. bench/shard_bench.sh (BENCH_SHARD=1, off by default: ~5 min): memory and step time of
#    --shard none/zero1/zero2/zero3 at 2 and 4 ranks, and the share of the allreduce hidden
#    behind backward.
# 4. bench/pipeline_bench.sh (BENCH_PP=1, off by default: ~5 min): step time, bubble
#    (measured and by the formula) and activation memory of gpipe/1f1b/interleaved at 2
#    and 4 pipeline ranks against one process.
# 5. bench/tp_bench.sh (BENCH_TP=1, off by default: ~10 min): one GRU layer whole against a
#    tensor-parallel shard on each of 2 ranks, hidden 64 .. 2048 (the crossover width).
# 6. bench/plan_check.sh (BENCH_PLAN=1, off by default: ~8 min): the model-parallel plan
#    (distdpd plan --cluster) against measured step times at 2 and 4 ranks (docs/comm.md).
# 7. bench/ckpt_stall.sh (BENCH_CKPT=1, off by default: ~1 min): the step loop's stall per
#    checkpoint with asynchronous writing against synchronous writing, on a large resnet.
# 8. bench/launch_bench.sh (BENCH_LAUNCH=1, off by default: ~1 min): time lost per failure
#    under distdpd launch (kill -9 of a rank, a SIGSTOPped rank; docs/elastic.md).
# 9. bench/eval_memory.sh (BENCH_EVAL_MEM=1, off by default: ~7 min, 800 MB of disk): peak
#    RSS of `distdpd eval` from 0.4 M to 50 M samples against the ~1 byte-per-byte target.
# Knobs of recipe_bench.sh: BENCH_ROUNDS, BENCH_EPOCHS, BENCH_STEPS, BENCH_TWO_THREADS,
# BENCH_RSS, BENCH_RSS_SIZES, BENCH_PYTHON; of simd_bench.sh: BENCH_SIMD_ROUNDS,
# BENCH_SIMD_LARGE, BENCH_SIMD_BASE, BENCH_SIMD_PAIR; of threads_bench.sh: BENCH_THREADS_ROUNDS,
# BENCH_THREADS_EPOCHS, BENCH_THREADS_LARGE.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
# section VAR DEFAULT TITLE COMMAND...: runs COMMAND under a "## TITLE" heading unless VAR
# (default DEFAULT) is 0
section() {
    local var=$1 def=$2 title=$3
    shift 3
    if [ "${!var:-$def}" != 0 ]; then
        echo
        echo "## $title"
        echo
        "$@"
    fi
}
bash bench/recipe_bench.sh "$BUILD" "$BUILD/bench-results"
section BENCH_SIMD 1 "Per SIMD path against the sgemm peak (bench/simd_bench.sh)" bash bench/simd_bench.sh "$BUILD"
section BENCH_THREADS 1 "Threads inside a rank (bench/threads_bench.sh)" bash bench/threads_bench.sh "$BUILD"
if [ "${BENCH_ALLREDUCE:-1}" != 0 ]; then
    echo
    echo "## Allreduce (bench/allreduce.sh)"
    echo
    if command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1; then
        bash bench/allreduce.sh "$BUILD" "${BENCH_ALLREDUCE_MAX:-16777216}"
    else
        echo "mpicc/mpirun not found: allreduce benchmark skipped"
    fi
fi
section BENCH_SHARD 0 "Sharded data parallelism (bench/shard_bench.sh)" bash bench/shard_bench.sh "$BUILD"
section BENCH_PP 0 "Pipeline parallelism (bench/pipeline_bench.sh)" bash bench/pipeline_bench.sh "$BUILD"
section BENCH_TP 0 "Tensor parallelism of a GRU layer (bench/tp_bench.sh)" bash bench/tp_bench.sh "$BUILD"
section BENCH_PLAN 0 "The model-parallel plan against measured step times (bench/plan_check.sh)" bash bench/plan_check.sh "$BUILD"
section BENCH_CKPT 0 "Checkpoint stall: asynchronous against synchronous writing (bench/ckpt_stall.sh)" bash bench/ckpt_stall.sh "$BUILD"
section BENCH_LAUNCH 0 "Time lost per failure (bench/launch_bench.sh)" bash bench/launch_bench.sh "$BUILD"
section BENCH_EVAL_MEM 0 "Evaluation memory against data size (bench/eval_memory.sh)" env BUILD="$BUILD" bash bench/eval_memory.sh
