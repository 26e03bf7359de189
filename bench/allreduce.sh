#!/usr/bin/env bash
# Allreduce benchmark at 2 and 4 ranks: latency and bus bandwidth of ring, tree, rhd and
# hier next to MPI_Allreduce, 4 B .. 64 MB (bench/bench_allreduce.c). At 4 ranks HIER
# runs with simulated nodes of 2 ranks (DD_COMM_RANKS_PER_NODE=2), so its cross-node path
# is measured too. By hand, not a timed test:
#   bash bench/allreduce.sh [BUILD_DIR] [MAX_BYTES]      (defaults: build, 67108864)
# The library must be built in BUILD_DIR (make, or cmake --build BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
MAXB=${2:-67108864}
if [ ! -e "$BUILD/libdistdpd.so" ] && [ ! -e "$BUILD/libdistdpd.a" ]; then
    echo "bench/allreduce.sh: build the library first (cmake --build $BUILD)" >&2
    exit 1
fi
BIN="$BUILD/bench_allreduce"
mpicc -O2 -Iinclude bench/bench_allreduce.c -L"$BUILD" -ldistdpd -ldistdpd_rf -Wl,-rpath,"$PWD/$BUILD" -lm -o "$BIN"
# running as root, oversubscribed, in containers (docs: distributed.md)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1
echo "machine: $(nproc) CPUs; $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo
mpirun -np 2 "$BIN" "$MAXB"
echo
DD_COMM_RANKS_PER_NODE=2 mpirun -x DD_COMM_RANKS_PER_NODE -np 4 "$BIN" "$MAXB"
