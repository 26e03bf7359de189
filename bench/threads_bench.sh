#!/usr/bin/env bash
# Threads inside a rank against ranks (issue 17; docs/performance.md, "Threads inside a
# rank"): the reference recipe (gru 23, frame 200, stride 1, batch 64, AdamW lr 5e-3,
# seed 0) for BENCH_THREADS_EPOCHS epochs as
#   1 rank x 1 thread, 1 rank x 2 threads, and mpirun -np 2 x 1 thread (if mpirun exists),
# BENCH_THREADS_ROUNDS rounds with the three alternating; median epoch time (training +
# evaluation, from metrics.jsonl), speed-up against 1 x 1 (target: 2 threads >= 1.7x),
# which of the two 2-core layouts is faster, and whether the losses of 1 and 2 threads are
# identical (they must be). OMP_WAIT_POLICY=passive unless set (threads sleep at the
# end of a parallel region instead of spinning: a machine shared with other jobs); when
# it is not set, 1 x 2 also runs with OMP_WAIT_POLICY=active (threads spin between
# parallel regions: on idle cores a region then starts in ~1 us instead of a futex
# wake-up; a recipe step is one region, its batch chunks), row "1 x 2 active".
# BENCH_THREADS_BASE=DIR: a second build (e.g. of the commit before a change; its
# distdpd) also runs 1 x 1 and 1 x 2 in the same rounds, rows "base 1 x 1" / "base 1 x 2",
# and the speed-ups against both 1 x 1 rows are printed.
#
# Then (BENCH_THREADS_LARGE=1, the default) a large model, resnet hidden 512 x 8 blocks
# (8.4 M parameters, batch 4 x 200: 4 frames, no batch chunks; bench_train steps mode;
# its convolutions run im2col + OpenBLAS sgemm, which the library's threads do not
# split): wall and CPU-time GFLOP/s at DD_THREADS 1 and 2 (bench_train calls
# dd_nn_threads_set as --threads does) with OPENBLAS_NUM_THREADS=1 (which wins: what
# --threads 2 gave before it set OpenBLAS's threads), and DD_THREADS 2 without
# OPENBLAS_NUM_THREADS (--threads 2 now: OpenBLAS gets 2 threads), medians over the
# rounds, speed-up against 1 thread (the issue asks for "scaling with threads"; the 1.7x
# of the recipe is printed as the reference) and CPU-time GFLOP/s (all threads' CPU
# time: per core) against the single-core sgemm peak by CPU time (bench/sgemm_peak,
# 2048^3; the issue's target: >= 60 %), after
# a line with the processor, SIMD path, OpenBLAS version and core.
# BENCH_THREADS_RECIPE=0 skips the recipe rounds (the large model only).
#
#   bash bench/threads_bench.sh [BUILD_DIR [OUT_DIR]]   (defaults: build, BUILD_DIR/bench-threads)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=${2:-$BUILD/bench-threads}
ROUNDS=${BENCH_THREADS_ROUNDS:-3}
EPOCHS=${BENCH_THREADS_EPOCHS:-2}
DD="$BUILD/distdpd"
rm -rf "$OUT"
mkdir -p "$OUT"
BASE=${BENCH_THREADS_BASE:-}
[ -n "$BASE" ] && [ ! -x "$BASE/distdpd" ] && { echo "BENCH_THREADS_BASE=$BASE: no $BASE/distdpd" >&2; exit 2; }
ACTIVE=0
[ -z "${OMP_WAIT_POLICY:-}" ] && ACTIVE=1
export OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
unset DD_THREADS
DATA=../shared/data/opendpd/DPA_200MHz
if [ ! -f "$DATA/spec.json" ]; then
    DATA="$OUT/sim"
    "$DD" simulate --out "$DATA" --signal 10x20 --samples 38400 -q
fi
load() { cut -d' ' -f1-3 /proc/loadavg; }
RECIPE=(--data "$DATA" --model gru --hidden 23 --frame 200 --stride 1 --batch 64 --epochs "$EPOCHS" --lr 5e-3
    --opt adamw --seed 0 --progress none -q)
MPI=0
if command -v mpirun >/dev/null 2>&1; then
    MPI=1
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
fi
echo "processor: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(getconf _NPROCESSORS_ONLN) CPUs;" \
    "SIMD path ${DD_SIMD:-of the CPU (avx512 > avx2 > generic)}; OMP_WAIT_POLICY=$OMP_WAIT_POLICY; $ROUNDS rounds x $EPOCHS epochs; load $(load)"
RROUNDS=$ROUNDS
[ "${BENCH_THREADS_RECIPE:-1}" = 0 ] && RROUNDS=0
for r in $(seq 1 "$RROUNDS"); do
    layouts=("1x1" "1x2")
    [ "$ACTIVE" = 1 ] && layouts+=("1x2a")
    [ "$MPI" = 1 ] && layouts+=("2x1")
    [ -n "$BASE" ] && layouts+=("b1x1" "b1x2")
    [ $((r % 2)) = 0 ] && layouts=("${layouts[@]:1}" "${layouts[0]}")
    for l in "${layouts[@]}"; do
        case $l in
        1x1) "$DD" train-pa "${RECIPE[@]}" --threads 1 --out "$OUT/run_${l}_$r" ;;
        1x2) "$DD" train-pa "${RECIPE[@]}" --threads 2 --out "$OUT/run_${l}_$r" ;;
        1x2a) OMP_WAIT_POLICY=active "$DD" train-pa "${RECIPE[@]}" --threads 2 --out "$OUT/run_${l}_$r" ;;
        2x1) mpirun -np 2 "$DD" train-pa "${RECIPE[@]}" --threads 1 --out "$OUT/run_${l}_$r" ;;
        b1x1) "$BASE/distdpd" train-pa "${RECIPE[@]}" --threads 1 --out "$OUT/run_${l}_$r" ;;
        b1x2) "$BASE/distdpd" train-pa "${RECIPE[@]}" --threads 2 --out "$OUT/run_${l}_$r" ;;
        esac
    done
    echo "  round $r done (load $(load))"
done
[ "$RROUNDS" -gt 0 ] && python3 - "$OUT" "$ROUNDS" <<'EOF'
import glob, json, os, statistics as st, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def rows(l, r):
    f = os.path.join(out, f"run_{l}_{r}", "metrics.jsonl")
    return [json.loads(x) for x in open(f)] if os.path.exists(f) else []
res = {}
for l in ("1x1", "1x2", "1x2a", "2x1", "b1x1", "b1x2"):
    t = [x["time_s"] + x["eval_time_s"] for r in range(1, rounds + 1) for x in rows(l, r)]
    if t: res[l] = st.median(t)
same = all([x["train_loss"] for x in rows("1x1", r)] == [x["train_loss"] for x in rows(l, r)]
           for r in range(1, rounds + 1) for l in ("1x2", "1x2a") if l in res)
base = "b1x1" in res
print()
print("| ranks x threads | epoch s (median) | speed-up vs 1 x 1 | target |" + (" vs base 1 x 1 |" if base else ""))
print("|---|---|---|---|" + ("---|" if base else ""))
for l, name in (("1x1", "1 x 1"), ("1x2", "1 x 2 (--threads 2)"), ("1x2a", "1 x 2 active (OMP_WAIT_POLICY=active)"),
                ("2x1", "2 x 1 (mpirun -np 2)"), ("b1x1", "base 1 x 1"), ("b1x2", "base 1 x 2 (--threads 2)")):
    if l not in res: continue
    ref = "b1x1" if l.startswith("b") else "1x1"
    sp = res[ref] / res[l]
    tgt = "" if l in ("1x1", "b1x1") else (">= 1.7x: " + ("met" if sp >= 1.7 else "not met"))
    print(f"| {name} | {res[l]:.3f} | {sp:.2f}x | {tgt} |" + (f" {res['b1x1'] / res[l]:.2f}x |" if base else ""))
if "2x1" in res:
    best = min((l for l in ("1x2", "1x2a") if l in res), key=res.get)
    print(f"\nfaster on 2 cores here: {'threads (' + best + ')' if res[best] < res['2x1'] else 'ranks (2 x 1)'}")
print(f"train losses of 1 and 2 threads (both wait policies) identical in every round: {'yes' if same else 'NO'}")
EOF
[ "$RROUNDS" -gt 0 ] && echo "load at the end: $(load)"

[ "${BENCH_THREADS_LARGE:-1}" = 0 ] && exit 0
LIB=$(cd "$BUILD" && pwd)
${CC:-cc} -O2 -std=c11 -D_DEFAULT_SOURCE -Iinclude bench/bench_train.c -L"$LIB" -ldistdpd -ldistdpd_rf \
    -Wl,-rpath,"$LIB" -lm -o "$OUT/bench_train"
# shellcheck disable=SC2046
${CC:-cc} -O2 $(pkg-config --cflags openblas) bench/sgemm_peak.c $(pkg-config --libs openblas) -o "$OUT/sgemm_peak"
PEAK=$(OPENBLAS_NUM_THREADS=1 "$OUT/sgemm_peak" 2048 5)
echo
echo "large model: resnet 512 x 8 blocks (8.4 M parameters), batch 4 x 200 (4 frames: no batch chunks), 2 timed steps"
echo "processor: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(getconf _NPROCESSORS_ONLN) CPUs;" \
    "SIMD path ${DD_SIMD:-of the CPU (avx512 > avx2 > generic)}; OpenBLAS $(pkg-config --modversion openblas)," \
    "$(python3 -c 'import json, sys; print("core {core}, single-core sgemm peak {gflops} GFLOP/s wall, {gflops_cpu} CPU time".format(**json.loads(sys.argv[1])))' "$PEAK")" \
    "(2048^3); load $(load)"
: >"$OUT/large.jsonl"
for r in $(seq 1 "$ROUNDS"); do
    # DD_THREADS (as --threads) x OpenBLAS: 1 x 1; 2 x 1 (OPENBLAS_NUM_THREADS=1 wins:
    # --threads 2 before OpenBLAS followed it); 2 x follow (--threads 2 now:
    # dd_nn_threads_set gives OpenBLAS 2 threads)
    for cfg in "1 1" "2 1" "2 follow"; do
        # shellcheck disable=SC2086
        set -- $cfg
        if [ "$2" = follow ]; then
            env -u OPENBLAS_NUM_THREADS DD_THREADS="$1" "$OUT/bench_train" "$DATA" resnet 512 2 1 4 200 layers=8 kernel=3
        else
            DD_THREADS=$1 OPENBLAS_NUM_THREADS=$2 "$OUT/bench_train" "$DATA" resnet 512 2 1 4 200 layers=8 kernel=3
        fi | sed "s/^{/{\"threads\": $1, \"blas\": \"$2\", /" >>"$OUT/large.jsonl"
    done
    echo "  round $r done (load $(load))"
done
python3 - "$OUT/large.jsonl" "$PEAK" <<'EOF'
import json, statistics as st, sys
rs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
peak = json.loads(sys.argv[2])["gflops_cpu"]
def g(t, b, key="time_s"):
    v = [x["flops_per_sample"] * x["samples"] / x[key] * 1e-9 for x in rs if x["threads"] == t and x["blas"] == b]
    return st.median(v) if v else None
base = g(1, "1")
print("| DD_THREADS (--threads) | OpenBLAS threads | GFLOP/s (wall, median) | GFLOP/s (CPU time) | speed-up vs 1 thread"
      " | CPU-time GFLOP/s, % of the 1-core sgemm peak (CPU time) | reference |")
print("|---|---|---|---|---|---|---|")
for t, b, name in ((1, "1", "1"), (2, "1", "1 (OPENBLAS_NUM_THREADS=1)"), (2, "follow", "2 (follows --threads)")):
    v = g(t, b)
    if v is None or not base: continue
    ref = "" if t == 1 else ("1.7x: " + ("reached" if v / base >= 1.7 else "not reached"))
    print(f"| {t} | {name} | {v:.1f} | {g(t, b, 'cpu_s'):.1f} | {v / base:.2f}x | {100 * g(t, b, 'cpu_s') / peak:.0f} % | {ref} |")
EOF
echo "load at the end: $(load)"
