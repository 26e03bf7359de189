#!/bin/bash
# The model-parallel plan (distdpd plan --cluster) against measured step times on this
# machine: calibrates the shared-memory link (mpirun -np 2 distdpd plan --calibrate),
# measures the compute speed (distdpd plan --measure-compute: one forward + backward of
# the model at the global batch on one process), writes the cluster file (1 node, NP
# ranks), predicts each layout's step time (--json) and trains it for one epoch with
# mpirun -np NP distdpd train-pa, reading the step times from RUN/dp_steps.csv (median
# over the steps after the first two). Prints one Markdown table per rank count
# (layout, predicted, measured, measured / predicted) with the processor, the date and
# the load average before and after each run. docs/comm.md ("Model-parallel plan",
# "Accuracy here") has the numbers of a run.
#
# usage: bash bench/plan_check.sh [BUILD] [DATA] [STRIDE] [NPS]
#   BUILD   build directory (default build)
#   DATA    OpenDPD data set (default ../shared/data/opendpd/DPA_200MHz)
#   STRIDE  frame stride (default 20: 1143 frames of 200, 36 steps of batch 32 per epoch)
#   NPS     rank counts (default "2 4")
# Model: resnet hidden 256, 16 blocks (4.2 M parameters), batch 32, frame 200, AdamW.
set -euo pipefail
BUILD=${1:-build}
DATA=${2:-../shared/data/opendpd/DPA_200MHz}
STRIDE=${3:-20}
NPS=${4:-"2 4"}
CLI="$BUILD/distdpd"
[ -x "$CLI" ] || { echo "plan_check: $CLI not built (make build)" >&2; exit 1; }
[ -d "$DATA" ] || { echo "plan_check: no data set at $DATA" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
MODEL=(--model resnet --hidden 256 --layers 16 --kernel 3)
TRAIN_SAMPLES=$(($(wc -l <"$DATA/train_input.csv") - 1))
FRAMES=$(((TRAIN_SAMPLES - 200) / STRIDE + 1))
load() { cut -d' ' -f1-3 /proc/loadavg; }

echo "processor: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
echo "date:      $(date -u +%Y-%m-%dT%H:%MZ)"
echo "data:      $DATA, $FRAMES training frames (stride $STRIDE), batch 32 x 200"
echo "load before calibration: $(load)"
mpirun -np 2 "$CLI" plan --calibrate --calibration "$TMP/cal.json" >"$TMP/cal.out"
sed -n 2,3p "$TMP/cal.out"
"$CLI" plan "${MODEL[@]}" --batch 32 --frames "$FRAMES" --measure-compute --json >"$TMP/compute.json"
GFLOPS=$(python3 -c "import json,sys; print('%.4f' % json.load(open(sys.argv[1]))['gflops'])" "$TMP/compute.json")
SECS=$(python3 -c "import json,sys; print('%.4f' % json.load(open(sys.argv[1]))['seconds'])" "$TMP/compute.json")
echo "compute:   $GFLOPS GFLOP/s (forward + backward of 32 frames in $SECS s on one process; load $(load))"

# median step time of RUN/dp_steps.csv after the first two steps
median_step() {
    python3 - "$1" <<'EOF'
import csv, sys
rows = [float(r["step_s"]) for r in csv.DictReader(open(sys.argv[1])) if r["step_s"] not in ("nan", "")]
rows = sorted(rows[2:])
print("%.4f %d" % (rows[len(rows) // 2], len(rows)))
EOF
}

# the prediction for (tp, pp) at --micro M from plan --json
predicted() {
    python3 - "$1" "$2" "$3" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
tp, pp = int(sys.argv[2]), int(sys.argv[3])
for r in d["layouts"]:
    if r["tp"] == tp and r["pp"] == pp and r["shard"] == "none":
        print("%.4f %.3f" % (r["step_s"], r["bubble"]))
        break
EOF
}

for NP in $NPS; do
    cat >"$TMP/cluster$NP.json" <<EOF
{"format": "distdpd-cluster", "nodes": 1, "ranks_per_node": $NP,
 "intra_link": {"calibration": "cal.json"}, "memory_mib": 16384, "gflops": $GFLOPS,
 "comment": "this machine: shared memory calibrated at 2 ranks, compute measured by plan --measure-compute"}
EOF
    if [ "$NP" = 2 ]; then
        LAYOUTS=("1 1 0" "1 2 4" "1 2 8" "2 1 0")
    else
        LAYOUTS=("1 1 0" "1 4 8" "2 2 4" "4 1 0" "1 2 4")
    fi
    echo
    echo "### $NP ranks"
    echo
    echo "| layout | predicted s | measured s (median of steps) | measured / predicted | load before -> after |"
    echo "|---|---|---|---|---|"
    for L in "${LAYOUTS[@]}"; do
        read -r TP PP M <<<"$L"
        MICRO=()
        [ "$M" != 0 ] && MICRO=(--micro "$M")
        "$CLI" plan "${MODEL[@]}" --batch 32 --frames "$FRAMES" --cluster "$TMP/cluster$NP.json" "${MICRO[@]}" \
            --json >"$TMP/plan.json"
        read -r PRED PBUB <<<"$(predicted "$TMP/plan.json" "$TP" "$PP")"
        OPTS=()
        [ "$TP" != 1 ] && OPTS+=(--tp "$TP")
        [ "$PP" != 1 ] && OPTS+=(--pp "$PP")
        [ "$M" != 0 ] && OPTS+=(--micro "$M")
        L0=$(load)
        rm -rf "$TMP/run"
        mpirun -np "$NP" "$CLI" train-pa --data "$DATA" "${MODEL[@]}" --batch 32 --frame 200 --stride "$STRIDE" \
            --epochs 1 --no-test --no-report --progress none --out "$TMP/run" "${OPTS[@]}" >"$TMP/train.out" 2>&1 ||
            { cat "$TMP/train.out" >&2; exit 1; }
        L1=$(load)
        read -r MEAS NSTEP <<<"$(median_step "$TMP/run/dp_steps.csv")"
        D=$((NP / (TP * PP)))
        NAME="tp $TP x pp $PP x dp $D"
        [ "$M" != 0 ] && NAME="$NAME, 1f1b M $M (bubble predicted $(python3 -c "print('%.0f %%' % (100*$PBUB))"))"
        RATIO=$(python3 -c "print('%.2f' % ($MEAS / $PRED))")
        echo "| $NAME | $PRED | $MEAS ($NSTEP steps) | $RATIO | $L0 -> $L1 |"
    done
done
