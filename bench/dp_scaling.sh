#!/bin/bash
# Data-parallel scaling on the OpenDPD reference recipe (gru hidden 23, frame 200, stride 1,
# AdamW lr 5e-3, seed 0) on DPA_200MHz. A benchmark, run by hand, not a timed test.
#
# Strong scaling: global batch 64 on 1 and on 2 ranks: the same steps and (by equivalence)
# the same result; time per epoch (training steps, rank 0's time_s in metrics.jsonl, and
# the process wall time) over REPEATS runs of EPOCHS epochs, 1-rank and 2-rank runs
# alternating so that both see the same background load; medians. Target: 2 ranks at
# least 1.8x faster than 1.
# Weak scaling: batch 64 per rank (global 64 on 1 rank, 128 on 2), learning rate by the
# linear scaling rule (5e-3 x ranks); time per epoch and test NMSE after WEAK_EPOCHS epochs.
#
# usage: bench/dp_scaling.sh [DISTDPD] [EPOCHS] [REPEATS] [WEAK_EPOCHS] [ALLREDUCE]
#   defaults: build/distdpd, 1, 5, 10, ring
# Prints the load average before and after: the ratio is only meaningful when nothing else
# runs on the machine (2 ranks need 2 free cores; 1 rank needs one). On a shared machine the
# 2-rank runs are bimodal (another job on one core doubles their time while the 1-rank run
# still finds a free core), so the minimum over the runs (the unloaded machine) is printed
# next to the median, with the number of 2-rank runs that were slowed down.
set -euo pipefail
cd "$(dirname "$0")/.."
DD=$(realpath "${1:-build/distdpd}")
EPOCHS=${2:-1}
REPEATS=${3:-5}
WEAK_EPOCHS=${4:-10}
ALGO=${5:-ring}
DATA=../shared/data/opendpd/DPA_200MHz
if [ ! -f "$DATA/spec.json" ]; then
    echo "SKIP: $DATA not found" >&2
    exit 77
fi
command -v mpirun >/dev/null || { echo "bench/dp_scaling.sh: mpirun not found" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export OPENBLAS_NUM_THREADS=1
W=$(mktemp -d "${TMPDIR:-/tmp}/dpscale.XXXXXX")
trap 'rm -rf "$W"' EXIT
RECIPE=(--data "$DATA" --model gru --hidden 23 --frame 200 --stride 1 --seed 0 --no-report -q)

# run NP OUT ARGS...: trains, prints the wall time in seconds
run() {
    local np=$1 out=$2 t0 t1
    shift 2
    t0=$(date +%s.%N)
    if [ "$np" -eq 1 ]; then
        "$DD" train-pa "${RECIPE[@]}" --out "$out" "$@"
    else
        mpirun -np "$np" --bind-to none "$DD" train-pa "${RECIPE[@]}" --out "$out" --allreduce "$ALGO" "$@"
    fi
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }'
}

# field KEY of every line of a metrics.jsonl
field() { grep -o "\"$2\":[-0-9.eE+]*" "$1" | sed 's/.*://'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.6g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
minimum() { sort -g | head -n 1; }

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'); $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "== strong scaling: global batch 64, $EPOCHS epoch(s) per run, $REPEATS runs each, alternating ($ALGO)"
: >"$W/s1"
: >"$W/s2"
: >"$W/w1"
: >"$W/w2"
for r in $(seq 1 "$REPEATS"); do
    for np in 1 2; do
        out=$W/strong_${np}_$r
        wall=$(run "$np" "$out" --batch 64 --lr 5e-3 --epochs "$EPOCHS")
        t=$(field "$out/metrics.jsonl" time_s | awk '{ s += $1 } END { printf "%.4f", s / NR }')
        echo "$t" >>"$W/s$np"
        awk -v w="$wall" -v e="$EPOCHS" 'BEGIN { printf "%.4f\n", w / e }' >>"$W/w$np"
        printf "  run %d, %d rank%s: %.3f s/epoch training, %.3f s/epoch wall, test NMSE %s dB\n" "$r" "$np" \
            "$([ "$np" -gt 1 ] && echo s || echo "")" "$t" "$(tail -n 1 "$W/w$np")" \
            "$(field "$out/metrics.jsonl" test_nmse_db | tail -n 1)"
    done
done
m1=$(median <"$W/s1")
m2=$(median <"$W/s2")
b1=$(minimum <"$W/s1")
b2=$(minimum <"$W/s2")
w1=$(median <"$W/w1")
w2=$(median <"$W/w2")
slow=$(awk -v b="$b2" '$1 > 1.5 * b { n++ } END { print n + 0 }' "$W/s2")
echo
printf "  best time per epoch (training steps): 1 rank %.3f s, 2 ranks %.3f s: speed-up %.2fx (target >= 1.8x)\n" \
    "$b1" "$b2" "$(awk -v a="$b1" -v b="$b2" 'BEGIN { print a / b }')"
printf "  median time per epoch (training steps): 1 rank %.3f s, 2 ranks %.3f s: speed-up %.2fx\n" \
    "$m1" "$m2" "$(awk -v a="$m1" -v b="$m2" 'BEGIN { print a / b }')"
echo "  2-rank runs slowed down by other load (> 1.5x their best): $slow of $REPEATS"
printf "  median wall time per epoch (incl. start-up, evaluation): 1 rank %.3f s, 2 ranks %.3f s: %.2fx\n" \
    "$w1" "$w2" "$(awk -v a="$w1" -v b="$w2" 'BEGIN { print a / b }')"
n1=$(field "$W/strong_1_1/metrics.jsonl" test_nmse_db | tail -n 1)
n2=$(field "$W/strong_2_1/metrics.jsonl" test_nmse_db | tail -n 1)
echo "  same result: test NMSE after $EPOCHS epoch(s): 1 rank $n1 dB, 2 ranks $n2 dB"
grep -E '"(comm|exposed|hidden)_s_per_step"' "$W/strong_2_1/parallel.json" | tr -d '\t,"' | sed 's/^/  2 ranks, rank 0: /'

echo
echo "== weak scaling: batch 64 per rank, lr 5e-3 x ranks (linear rule), $WEAK_EPOCHS epochs"
for np in 1 2; do
    out=$W/weak_$np
    wall=$(run "$np" "$out" --batch $((64 * np)) --lr "$(awk -v n="$np" 'BEGIN { print 5e-3 * n }')" --epochs "$WEAK_EPOCHS")
    t=$(field "$out/metrics.jsonl" time_s | minimum)
    tm=$(field "$out/metrics.jsonl" time_s | median)
    steps=$(field "$out/metrics.jsonl" step | head -n 1)
    frames=$(tr -d ' \t\n' <"$out/config.json" | grep -o '"train_frames":[0-9]*' | sed 's/.*://')
    printf "  %d rank%s: global batch %d, %d steps/epoch, best %.3f s/epoch (%.0f frames/s), median %.3f s, wall %.1f s\n" \
        "$np" "$([ "$np" -gt 1 ] && echo s || echo "")" $((64 * np)) "$steps" "$t" \
        "$(awk -v t="$t" -v f="$frames" 'BEGIN { print f / t }')" "$tm" "$wall"
    printf "    test NMSE by epoch:"
    field "$out/metrics.jsonl" test_nmse_db | awk '{ printf " %.2f", $1 }'
    echo
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
