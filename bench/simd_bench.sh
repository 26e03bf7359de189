#!/usr/bin/env bash
# Training throughput per SIMD path against the single-core sgemm peak of the matching
# OpenBLAS kernel, measured side by side in one run (issue 17; docs/performance.md,
# "Per SIMD path"). On an AVX-512 machine the AVX2 path is forced (DD_SIMD=avx2) and
# OpenBLAS is forced to its AVX2 kernel (OPENBLAS_CORETYPE=Haswell), which emulates an
# AVX2-only server (e.g. AMD EPYC before Zen 4) on the same cores.
#
#   bash bench/simd_bench.sh [BUILD_DIR [OUT_DIR]]     (defaults: build, BUILD_DIR/bench-simd)
#
# Prints the processor, the SIMD paths it supports, OpenBLAS's own core, the issue rates of
# bench/uarch_probe (vector loads and stores, fused multiply-adds, divisions), then per
# path: the sgemm peak (wall and CPU time: the machine may be shared), and per model the median
# over BENCH_SIMD_ROUNDS rounds (paths and models interleaved) of GFLOP/s from the
# process CPU time (bench_train's cpu_s; wall-clock figures are in OUT_DIR/*.jsonl), with
# the share of that path's sgemm peak and the issue's target:
#   gru 23 (the reference recipe's model, batch 64 x 200)   >= 50 % of peak
#   tcn (default, 96 channels)                              the GFLOP/s of gru 23
#     (bench_pair: chunks of 20 steps of tcn and gru 23 in turn in one process,
#     BENCH_SIMD_PAIR chunk pairs per round; the figure is the median of the per-pair
#     ratios, met at >= 0.95. Separate processes of a second each land in different
#     machine states on a shared host and their medians' ratio moved by 10 %.)
#   resnet hidden 512, 8 blocks (8.4 M parameters, batch 4) >= 60 % of peak
#   hammerstein hidden 1024, 8 blocks (8.4 M parameters, batch 4, lr 3e-4) >= 60 % of peak
# (tcn has no large row: its parameters grow as about 49 per channel, so its widest
# setting, 4,096 channels, has about 200 k.)
# BENCH_SIMD_BASE=DIR: a second build (e.g. of the last commit) timed in the same rounds
# (column "before"). BENCH_SIMD_ROUNDS (default 5), BENCH_SIMD_LARGE=0 skips the large models,
# BENCH_SIMD_PAIR (default 25) chunk pairs of tcn and gru 23 per round.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=${2:-$BUILD/bench-simd}
ROUNDS=${BENCH_SIMD_ROUNDS:-5}
LARGE=${BENCH_SIMD_LARGE:-1}
BASE=${BENCH_SIMD_BASE:-}
PAIRS=${BENCH_SIMD_PAIR:-25}
mkdir -p "$OUT/bin"
OUT=$(cd "$OUT" && pwd)
LIB=$(cd "$BUILD" && pwd)
CC=${CC:-cc}
CFL=(-O2 -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Iinclude)
for b in bench_train bench_pair; do
    $CC "${CFL[@]}" bench/$b.c -L"$LIB" -ldistdpd -ldistdpd_rf -Wl,-rpath,"$LIB" -lm -o "$OUT/bin/$b"
done
if [ -n "$BASE" ]; then
    BLIB=$(cd "$BASE" && pwd)
    BRF=()
    [ -e "$BLIB/libdistdpd_rf.so" ] && BRF=(-ldistdpd_rf) # builds before the library split have none
    for b in bench_train bench_pair; do
        $CC "${CFL[@]}" bench/$b.c -L"$BLIB" -ldistdpd "${BRF[@]}" -Wl,-rpath,"$BLIB" -lm -o "$OUT/bin/${b}_base"
    done
fi
$CC "${CFL[@]}" bench/uarch_probe.c -o "$OUT/bin/uarch_probe"
# shellcheck disable=SC2046
$CC "${CFL[@]}" $(pkg-config --cflags openblas) bench/sgemm_peak.c $(pkg-config --libs openblas) -o "$OUT/bin/sgemm_peak"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

DATA=../shared/data/opendpd/DPA_200MHz
if [ ! -f "$DATA/spec.json" ]; then
    DATA="$OUT/sim"
    [ -f "$DATA/spec.json" ] || "$BUILD/distdpd" simulate --out "$DATA" --signal 10x20 --samples 38400 -q
fi

load() { cut -d' ' -f1-3 /proc/loadavg; }
CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
PATHS="avx2"
grep -q -m1 avx512f /proc/cpuinfo && PATHS="avx2 avx512"
grep -q -m1 avx2 /proc/cpuinfo || PATHS="generic"
core_of() { case $1 in avx512) echo SkylakeX ;; avx2) echo Haswell ;; *) echo "" ;; esac; }
echo "processor: $CPU, $(getconf _NPROCESSORS_ONLN) CPUs; SIMD paths: $PATHS (default: ${DD_SIMD:-${PATHS##* }})"
# with_core PATH CMD...: CMD with OpenBLAS forced to the kernel of PATH's width (an empty
# OPENBLAS_CORETYPE is not the same as none: OpenBLAS 0.3.21 then reports "Cooperlake")
with_core() {
    local c
    c=$(core_of "$1")
    shift
    if [ -n "$c" ]; then OPENBLAS_CORETYPE=$c "$@"; else env -u OPENBLAS_CORETYPE "$@"; fi
}
echo "OpenBLAS core detected: $(env -u OPENBLAS_CORETYPE "$OUT/bin/sgemm_peak" 64 1 | sed 's/.*"core": "\([^"]*\)".*/\1/')"
"$OUT/bin/uarch_probe" >"$OUT/uarch.json"
echo "issue rates on one core (bench/uarch_probe): $(cat "$OUT/uarch.json")"
echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ), load $(load), $ROUNDS rounds"

: >"$OUT/runs.jsonl"
: >"$OUT/pairs.jsonl"
: >"$OUT/sgemm.jsonl"
models=("gru 23 60")
[ "$LARGE" != 0 ] && models+=("resnet 512 2 1 4 200 layers=8 kernel=3" "hammerstein 1024 2 1 4 200 layers=8 lr=3e-4")
for r in $(seq 1 "$ROUNDS"); do
    for p in $PATHS; do
        with_core "$p" "$OUT/bin/sgemm_peak" 2048 3 |
            sed "s/^{/{\"path\": \"$p\", /" >>"$OUT/sgemm.jsonl"
        for spec in "${models[@]}"; do
            # shellcheck disable=SC2086
            set -- $spec
            for b in "" ${BASE:+_base}; do
                DD_SIMD=$p with_core "$p" "$OUT/bin/bench_train$b" "$DATA" "$@" |
                    sed "s/^{/{\"path\": \"$p\", \"build\": \"${b:-new}\", /" >>"$OUT/runs.jsonl"
            done
        done
        for b in "" ${BASE:+_base}; do
            DD_SIMD=$p with_core "$p" "$OUT/bin/bench_pair$b" "$DATA" 20 "$PAIRS" tcn 0 gru 23 | tail -n 1 |
                sed "s/^{/{\"path\": \"$p\", \"build\": \"${b:-new}\", /" >>"$OUT/pairs.jsonl"
        done
    done
    echo "  round $r done (load $(load))"
done
echo "load at the end: $(load)"
python3 - "$OUT" <<'EOF'
import json, os, statistics as st, sys
out = sys.argv[1]
rd = lambda f: [json.loads(l) for l in open(os.path.join(out, f)) if l.startswith("{")]
runs, sg, pairs = rd("runs.jsonl"), rd("sgemm.jsonl"), rd("pairs.jsonl")
paths = sorted({s["path"] for s in sg}, key=["generic", "avx2", "avx512"].index)
peak = {p: st.median([s["gflops_cpu"] for s in sg if s["path"] == p]) for p in paths}
peakw = {p: st.median([s["gflops"] for s in sg if s["path"] == p]) for p in paths}
core = {p: next(s["core"] for s in sg if s["path"] == p) for p in paths}
def g(p, m, b="new"):
    if m == "tcn":  # bench_pair's tcn (model a), each a median over its chunks
        v = [x["a_gflops"] for x in pairs if x["path"] == p and x["build"] == b]
    else:
        v = [x["flops_per_sample"] * x["samples"] / x["cpu_s"] * 1e-9 for x in runs
             if x["path"] == p and x["model"] == m and x["build"] == b]
    return st.median(v) if v else None
def ratio(p, b="new"):  # tcn / gru 23 in the same process: the median of the rounds' medians
    v = [x["ratio"] for x in pairs if x["path"] == p and x["build"] == b]
    return st.median(v) if v else None
base = any(x["build"] == "_base" for x in runs)
print()
print("| path | OpenBLAS core | sgemm peak GFLOP/s (CPU time; wall) | model | GFLOP/s | % of peak | target | met |"
      + (" before | speed-up |" if base else ""))
print("|---|---|---|---|---|---|---|---|" + ("---|---|" if base else ""))
for p in paths:
    gru = g(p, "gru")
    for m, tgt in (("gru", "50 % of peak"), ("tcn", "= gru"), ("resnet", "60 % of peak"),
                   ("hammerstein", "60 % of peak")):
        v = g(p, m)
        if v is None: continue
        pct = 100 * v / peak[p]
        if m == "gru": ok = pct >= 50
        elif m == "tcn": ok = ratio(p) >= 0.95
        else: ok = pct >= 60
        name = {"gru": "gru 23", "tcn": "tcn 96", "resnet": "resnet 512 x 8",
                "hammerstein": "hammerstein 1024 x 8"}[m]
        if m == "tcn": tgt = f"= gru (paired: {ratio(p):.2f})"
        row = f"| {p} | {core[p]} | {peak[p]:.0f}; {peakw[p]:.0f} | {name} | {v:.1f} | {pct:.0f} % | {tgt} | {'yes' if ok else 'no'} |"
        if base:
            b = g(p, m, "_base")
            row += f" {b:.1f} | {v / b:.2f}x |" if b else " - | - |"
        print(row)
EOF
