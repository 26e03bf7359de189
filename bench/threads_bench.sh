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
# (8.4 M parameters, batch 4 x 200: 4 frames, no batch chunks; bench_train steps mode,
# which calls dd_nn_threads_set from DD_THREADS as --threads does; its convolutions run
# im2col + sgemm): wall and CPU-time GFLOP/s of the ways its sgemm calls can run, in
# rounds with the order rotating: DD_THREADS 1 with the products' panels one after the
# other (the default), 1 with one call per product (DD_GEMM_PANELS=1, the library before
# the panels), 2 with the panels on the 2 threads (--threads 2 now), 2 on OpenBLAS's own
# threads (OPENBLAS_NUM_THREADS=2, the opt-in), and with BENCH_THREADS_BASE that build's
# bench_train at DD_THREADS 1 and 2; medians, the paired (same-round) ratios against 1
# thread with panels (the issue asks for "scaling with threads"), and CPU-time GFLOP/s
# (all threads' CPU time: per core) against the single-core sgemm peak by CPU time
# (bench/sgemm_peak, 2048^3; the issue's target: >= 60 %), after a line with the
# processor, SIMD path, OpenBLAS version and core.
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
if [ -n "$BASE" ]; then
    BLIB=$(cd "$BASE" && pwd)
    ${CC:-cc} -O2 -std=c11 -D_DEFAULT_SOURCE -Iinclude bench/bench_train.c -L"$BLIB" -ldistdpd -ldistdpd_rf \
        -Wl,-rpath,"$BLIB" -lm -o "$OUT/bench_train_base"
fi
# the rows: DD_THREADS (as --threads) and how the sgemm calls run
#   1 panels  : one thread, OpenBLAS on one thread, the large products' panels one after
#               the other (the default)
#   1 onecall : DD_GEMM_PANELS=1: one sgemm call per product (the library before the
#               panels, at one thread)
#   2 panels  : --threads 2 now: the panels on the 2 threads (bit-identical to 1 panels)
#   2 openblas: OPENBLAS_NUM_THREADS=2: one call on OpenBLAS's own 2 threads (the opt-in;
#               what --threads 2 gave this model before the panels)
#   1 base, 2 base: BENCH_THREADS_BASE's bench_train at DD_THREADS 1 and 2 (OpenBLAS
#               following DD_THREADS there)
# the order rotates every round; "paired" = median (min-max) of the per-round ratios
cfgs=("1 panels" "1 onecall" "2 panels" "2 openblas")
[ -n "$BASE" ] && cfgs+=("1 base" "2 base")
LARGE=("$DATA" resnet 512 2 1 4 200 layers=8 kernel=3)
for r in $(seq 1 "$ROUNDS"); do
    [ "$r" -gt 1 ] && cfgs=("${cfgs[@]:1}" "${cfgs[0]}")
    for cfg in "${cfgs[@]}"; do
        # shellcheck disable=SC2086
        set -- $cfg
        case $2 in
        panels) env -u OPENBLAS_NUM_THREADS -u DD_GEMM_PANELS DD_THREADS="$1" "$OUT/bench_train" "${LARGE[@]}" ;;
        onecall) env -u OPENBLAS_NUM_THREADS DD_GEMM_PANELS=1 DD_THREADS="$1" "$OUT/bench_train" "${LARGE[@]}" ;;
        openblas) env -u DD_GEMM_PANELS OPENBLAS_NUM_THREADS="$1" DD_THREADS="$1" "$OUT/bench_train" "${LARGE[@]}" ;;
        base) env -u OPENBLAS_NUM_THREADS DD_THREADS="$1" "$OUT/bench_train_base" "${LARGE[@]}" ;;
        esac | sed "s/^{/{\"threads\": $1, \"blas\": \"$2\", \"round\": $r, /" >>"$OUT/large.jsonl"
    done
    echo "  round $r done (load $(load))"
done
python3 - "$OUT/large.jsonl" "$PEAK" <<'EOF'
import json, statistics as st, sys
rs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
peak = json.loads(sys.argv[2])["gflops_cpu"]
def vals(t, b, key):
    return {x["round"]: x["flops_per_sample"] * x["samples"] / x[key] * 1e-9 for x in rs if x["threads"] == t and x["blas"] == b}
def g(t, b, key="time_s"):
    v = list(vals(t, b, key).values())
    return st.median(v) if v else None
def paired(t, b, key):
    a, r = vals(t, b, key), vals(1, "panels", key)
    q = [a[k] / r[k] for k in a if k in r]
    return f"{st.median(q):.2f}x ({min(q):.2f}-{max(q):.2f})" if q else ""
base = g(1, "panels")
print("| DD_THREADS (--threads) | sgemm calls | GFLOP/s (wall, median) | GFLOP/s (CPU time) | paired wall speed-up vs"
      " 1 thread, panels (median, min-max) | paired CPU-time ratio | CPU time, % of the 1-core sgemm peak |")
print("|---|---|---|---|---|---|---|")
names = {"panels": "panels (the default)", "onecall": "one call per product (DD_GEMM_PANELS=1)",
         "openblas": "one call on OpenBLAS's own threads (OPENBLAS_NUM_THREADS)",
         "base": "base build (OpenBLAS follows --threads)"}
for t, b in ((1, "panels"), (1, "onecall"), (2, "panels"), (2, "openblas"), (1, "base"), (2, "base")):
    v = g(t, b)
    if v is None or not base: continue
    print(f"| {t} | {names[b]} | {v:.1f} | {g(t, b, 'cpu_s'):.1f} | {paired(t, b, 'time_s')} | {paired(t, b, 'cpu_s')}"
          f" | {100 * g(t, b, 'cpu_s') / peak:.0f} % |")
EOF
echo "load at the end: $(load)"
