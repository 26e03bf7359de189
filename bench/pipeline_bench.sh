#!/bin/bash
# Pipeline parallelism, measured side by side (bench/bench_pp.c, by hand, not a test): on
# DPA_200MHz, a deep resnet (hidden 256, 16 blocks, kernel 3: 18 stages, 4.2 M
# parameters) trains STEPS steps on one process and then at P = 2 and 4 pipeline ranks
# under gpipe, 1f1b and interleaved (V = 2) with M = P, 2P and 4P micro-batches of a
# global batch of 32 frames: step time against one process, the bubble measured from the
# strategy's timestamps (mean and worst rank) against (P-1)/(M+P-1) (interleaved: /V),
# and the largest rank's activation bytes against one process's.
#
# usage: bench/pipeline_bench.sh [BUILD] [STEPS]     (defaults build, 6)
# On a 2-core machine P = 4 is oversubscribed (two ranks per core): its step times and
# bubbles then include waiting for a core; the activation figures do not depend on it.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
STEPS=${2:-6}
DATA=../shared/data/opendpd/DPA_200MHz
if [ ! -f "$DATA/spec.json" ]; then
    echo "SKIP: $DATA not found" >&2
    exit 77
fi
command -v mpicc >/dev/null || { echo "bench/pipeline_bench.sh: mpicc not found" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1
W=$(mktemp -d "${TMPDIR:-/tmp}/ppbench.XXXXXX")
trap 'rm -rf "$W"' EXIT
mpicc -O2 -Iinclude bench/bench_pp.c -L"$BUILD" -ldistdpd -ldistdpd_rf -Wl,-rpath,"$(realpath "$BUILD")" -lm -o "$W/bench_pp"
echo "processor: $(lscpu | sed -n 's/^Model name: *//p' | head -1); SIMD: $(grep -o -w 'avx512f\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "date: $(date -u +%Y-%m-%d); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for P in 2 4; do
    echo
    mpirun -np "$P" "$W/bench_pp" "$DATA" resnet 256 16 3 32 "$STEPS" "$P,$((2 * P)),$((4 * P))" | grep -v '^json:'
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
