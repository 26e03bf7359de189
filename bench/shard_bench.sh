#!/bin/bash
# Sharded data parallelism, measured side by side (bench/bench_shard.c, by hand, not a
# test): for --shard none, zero1, zero2 and zero3 in one run each, the largest rank's
# model-state bytes (parameters + gradients + optimiser state, the arenas actually
# allocated) and its ratio to none, the median step time and its ratio to none, the bytes
# sent per step, and for none the share of the gradient allreduce hidden behind backward.
#
#   1. memory and step time: resnet hidden 256, 48 blocks (12.6 M parameters, AdamW) at 2
#      and 4 ranks (target: zero3 at 4 ranks <= 0.3x of none's model state);
#   2. overlap: resnet hidden 256, 16 blocks (4.2 M parameters) at 2 ranks, none, 4 MiB
#      buckets (target: at least 50 % of the allreduce time hidden behind backward).
#
# usage: bench/shard_bench.sh [BUILD] [STEPS]     (defaults build, 5)
# On a 2-core machine 4 ranks are oversubscribed: their step times say little; the memory
# figures do not depend on it. Prints the processor, the SIMD path and the load average.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
STEPS=${2:-5}
DATA=../shared/data/opendpd/DPA_200MHz
if [ ! -f "$DATA/spec.json" ]; then
    echo "SKIP: $DATA not found" >&2
    exit 77
fi
command -v mpicc >/dev/null || { echo "bench/shard_bench.sh: mpicc not found" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1
W=$(mktemp -d "${TMPDIR:-/tmp}/shardbench.XXXXXX")
trap 'rm -rf "$W"' EXIT
mpicc -O2 -Iinclude bench/bench_shard.c -L"$BUILD" -ldistdpd -ldistdpd_rf -Wl,-rpath,"$(realpath "$BUILD")" -lm -o "$W/bench_shard"
echo "processor: $(lscpu | sed -n 's/^Model name: *//p' | head -1); SIMD: $(grep -o -w 'avx512f\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "date: $(date -u +%Y-%m-%d); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "## Memory and step time per --shard mode"
for np in 2 4; do
    echo
    mpirun -np "$np" "$W/bench_shard" "$DATA" resnet 256 48 3 8 "$STEPS" | grep -v '^json:'
done
echo
echo "## Overlap of the gradient allreduce with backward (--shard none)"
echo
mpirun -np 2 "$W/bench_shard" "$DATA" resnet 256 16 3 16 "$STEPS" 4 0 | grep -v '^json:'
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
