#!/bin/bash
# Exported C code on the measured OpenDPD data set DPA_200MHz (docs/deploy.md):
#   1. trains a gru PA model (hidden 23, the default recipe, EPOCHS epochs) and a gru DPD
#      through it (hidden 15), or reuses PA_RUN / DPD_RUN when given;
#   2. exports each as C in float32, int16 and int8 (distdpd export --format c --fixed) and
#      prints the fixed-point loss export measured on the test split (model NMSE against
#      the measured output for the PA model; PA model(DPD(x)) NMSE and ACLR against G x
#      for the DPD) and the NMSE of the fixed-point output against float32;
#   3. compiles each with examples/deploy/main.c at -O2 (portable x86-64: SSE2, what the
#      code gets by default) and at -O3 -march=native, and measures samples per second of
#      one core (one process, the test input repeated for N samples), the variants
#      measured one after the other in one run, with the ratio to float32 -O2.
# Prints the processor, its SIMD extensions, the compiler and the load average (the
# throughput figures are only comparable within one run).
# Usage: bench/export_bench.sh [N_SAMPLES=2000000]   (from the repository root, after make)
set -euo pipefail
N=${1:-2000000}
DD=${DD_CLI:-build/distdpd}
DATA=${DATA:-../shared/data/opendpd/DPA_200MHz}
EPOCHS=${EPOCHS:-20}
CC=${CC:-cc}
[ -f "$DATA/spec.json" ] || { echo "export_bench: $DATA not found (the OpenDPD DPA_200MHz data set)"; exit 77; }
W=$(mktemp -d "${TMPDIR:-/tmp}/ddexp.XXXXXX")
trap 'rm -rf "$W"' EXIT
export OPENBLAS_NUM_THREADS=1
echo "processor: $(lscpu | sed -n 's/^Model name: *//p' | head -1); SIMD: $(grep -o -w 'sse4_2\|avx2\|avx512f\|fma' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "compiler: $($CC --version | head -1); load average: $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%Y-%m-%dT%H:%M:%SZ)"
PA=${PA_RUN:-$W/pa}
DPD=${DPD_RUN:-$W/dpd}
if [ -z "${PA_RUN:-}" ]; then
    echo "training the PA model: gru hidden 23, $EPOCHS epochs on $DATA"
    "$DD" train-pa --data "$DATA" --model gru --hidden 23 --epochs "$EPOCHS" --out "$PA" -q
fi
if [ -z "${DPD_RUN:-}" ]; then
    echo "training the DPD: gru hidden 15 through it, $EPOCHS epochs"
    "$DD" train-dpd --data "$DATA" --pa-run "$PA" --model gru --hidden 15 --epochs "$EPOCHS" --out "$DPD" -q
fi
json() { tr -d ' \n' <<<"$1" | grep -o "\"$2\":-\{0,1\}[0-9][0-9.eE+-]*" | head -1 | cut -d: -f2; }
printf "\n%-4s %-8s %10s %12s %12s %12s %12s\n" run numeric "vs float" "NMSE dB" "NMSE loss" "ACLR dBc" "ACLR loss"
for R in pa dpd; do
    RUN=$PA; [ $R = dpd ] && RUN=$DPD
    for v in float32 int16 int8; do
        mkdir -p "$W/$R-$v"
        rep=$("$DD" export --run "$RUN" --format c --fixed $v --prefix m --out "$W/$R-$v/m" --json)
        if [ $v = float32 ]; then
            printf "%-4s %-8s %10s %12s %12s %12s %12s   (float32 code vs library: max |diff| %s)\n" $R $v - - - - - \
                "$(json "$rep" float32_max_abs_diff)"
        else
            printf "%-4s %-8s %10.2f %12.2f %+12.3f %12.2f %+12.3f\n" $R $v "$(json "$rep" nmse_fixed_vs_float_db)" \
                "$(json "$rep" fixed_nmse_db)" "$(json "$rep" nmse_loss_db)" "$(json "$rep" fixed_aclr_db)" \
                "$(json "$rep" aclr_loss_db)"
            [ $v = int16 ] && printf "%-4s %-8s %10s %12.2f %12s %12.2f\n" $R float32 - "$(json "$rep" float_nmse_db)" - \
                "$(json "$rep" float_aclr_db)"
        fi
        $CC -std=c99 -O2 -I"$W/$R-$v" examples/deploy/main.c "$W/$R-$v/m.c" -lm -o "$W/$R-$v/o2"
        $CC -std=c99 -O3 -march=native -I"$W/$R-$v" examples/deploy/main.c "$W/$R-$v/m.c" -lm -o "$W/$R-$v/native"
    done
done
echo
echo "samples per second, one core ($N samples of the test input, repeated):"
printf "%-4s %-8s %14s %8s %14s %8s\n" run numeric "-O2" ratio "-O3 native" ratio
for R in pa dpd; do
    base=""
    for v in float32 int16 int8; do
        a=$("$W/$R-$v/o2" --bench "$N" "$DATA/test_input.csv" | awk '{ print $2 }')
        b=$("$W/$R-$v/native" --bench "$N" "$DATA/test_input.csv" | awk '{ print $2 }')
        [ -z "$base" ] && base=$a
        printf "%-4s %-8s %14.4g %8.2f %14.4g %8.2f\n" $R $v "$a" "$(awk -v x="$a" -v y="$base" 'BEGIN { print x / y }')" \
            "$b" "$(awk -v x="$b" -v y="$base" 'BEGIN { print x / y }')"
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
