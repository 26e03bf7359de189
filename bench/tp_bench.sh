#!/bin/bash
# Tensor parallelism of one GRU layer, measured (bench/bench_tp.c, by hand, not a test):
# one forward + backward of a GRU layer H -> H (B 16 frames of T 200 samples), whole on
# one process against a tensor-parallel shard on each of 2 ranks (one allgather of h_t
# per step forward, one reduce-scatter of dL/dh per step backward, or an allreduce in its
# place), for hidden 64 .. 2048: where does splitting one layer over 2 ranks start to pay?
# Besides the end-to-end times, the two parts of a shard's time are measured apart: its
# arithmetic on one process (bench_tp compute: no peer competing for the cores) and the
# layer's collectives alone on 2 ranks (bench_tp comm); on a shared machine their sum is
# the steadier figure.
#
# usage: bench/tp_bench.sh [BUILD] [WIDTHS]     (defaults build, "64 128 256 512 1024 2048")
# The machine may be shared: the script prints the processor, the date and the load
# average before and after, which say how much to trust the times.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
WIDTHS=${2:-64 128 256 512 1024 2048}
command -v mpicc >/dev/null || { echo "bench/tp_bench.sh: mpicc not found" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1
W=$(mktemp -d "${TMPDIR:-/tmp}/tpbench.XXXXXX")
trap 'rm -rf "$W"' EXIT
mpicc -O2 -Iinclude bench/bench_tp.c -L"$BUILD" -ldistdpd -ldistdpd_rf -Wl,-rpath,"$(realpath "$BUILD")" -lm -o "$W/bench_tp"
echo "processor: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; SIMD: $(grep -o -w 'avx512f\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "caches: L2 $(lscpu | sed -n 's/^L2 cache: *//p'), L3 $(lscpu | sed -n 's/^L3 cache: *//p')"
echo "date: $(date -u +%Y-%m-%d); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "Minimum over repetitions (7 up to hidden 256, 5 at 512, 3 beyond) of one forward + backward, in ms."
echo "T = 1: the whole layer as training runs it (the fused recurrence up to hidden 384) or forced onto"
echo "OpenBLAS (DD_NN_ROUTE=blas, the shard's per-step path), the faster of the two. T = 2: rank 0's"
echo "shard alone (compute), the collectives alone with reduce-scatter / allreduce (comm), and both"
echo "together end to end. Speed-up: T = 1 over T = 2 end to end, and over compute + comm (rs)."
echo
echo "| hidden | T = 1 | T = 1 path | shard compute | comm rs | comm allreduce | T = 2 rs | T = 2 allreduce | speed-up | from parts |"
echo "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"
field() { awk -v k="$1" '/^tp/ {print $k}'; }
for H in $WIDTHS; do
    reps=7
    [ "$H" -ge 512 ] && reps=5
    [ "$H" -ge 1024 ] && reps=3
    one=$(mpirun -np 1 "$W/bench_tp" run "$H" 16 200 "$reps" | field 7)
    path=fused
    [ "$H" -gt 384 ] && path=OpenBLAS
    if [ "$H" -le 384 ]; then
        blas=$(DD_NN_ROUTE=blas mpirun -x DD_NN_ROUTE -np 1 "$W/bench_tp" run "$H" 16 200 "$reps" | field 7)
        if awk -v a="$blas" -v b="$one" 'BEGIN {exit !(a < b)}'; then one=$blas; path=OpenBLAS; fi
    fi
    comp=$(mpirun -np 1 "$W/bench_tp" compute "$H" 16 200 "$reps" | field 7)
    crs=$(mpirun -np 2 "$W/bench_tp" comm "$H" 16 200 "$reps" 1 | field 7)
    car=$(mpirun -np 2 "$W/bench_tp" comm "$H" 16 200 "$reps" 0 | field 7)
    two=$(mpirun -np 2 "$W/bench_tp" run "$H" 16 200 "$reps" 1 | field 7)
    ar=$(mpirun -np 2 "$W/bench_tp" run "$H" 16 200 "$reps" 0 | field 7)
    echo "| $H | $one | $path | $comp | $crs | $car | $two | $ar | $(awk -v a="$one" -v b="$two" 'BEGIN {printf "%.2fx", a / b}') | $(awk -v a="$one" -v b="$comp" -v c="$crs" 'BEGIN {printf "%.2fx", a / (b + c)}') |"
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
