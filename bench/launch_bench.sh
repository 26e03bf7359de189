#!/usr/bin/env bash
# Time lost per failure under `distdpd launch` (docs/elastic.md, "Time lost per
# failure"): a data-parallel job at NP ranks (default 2) on a simulated data set, a rank
# killed -9 from outside at a random step, TRIALS times (default 5); and a rank stopped
# with SIGSTOP (a hang) once, detected by --hang-timeout LB_HANG (default 5 s).
#
#   bash bench/launch_bench.sh [BUILD_DIR [OUT_DIR]]     (defaults: build, BUILD_DIR/launch-bench)
#
# Per trial, from launch.jsonl: detection (the kill to mpirun's exit as the launcher saw
# it), restart (that exit to the first new step: mpirun start, data load, checkpoint
# load), time lost (the launcher's time_lost_s: from the failure, or the hung job's last
# heartbeat, to the first new step), and the steps redone (since the checkpoint). Then
# the medians, and the job's step time. LB_MODEL (default gru --hidden 64), LB_EVERY
# (checkpoint every N steps, default 50).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=${2:-$BUILD/launch-bench}
NP=${NP:-2}
TRIALS=${TRIALS:-5}
MODEL=${LB_MODEL:-gru --hidden 64}
EVERY=${LB_EVERY:-50}
HANG=${LB_HANG:-5}
CLI=$(realpath "$BUILD/distdpd")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1
rm -rf "$OUT"
mkdir -p "$OUT"
"$CLI" simulate --out "$OUT/data" --samples 40000 -q
# shellcheck disable=SC2206
JOB=(--data "$OUT/data" --model $MODEL --frame 100 --stride 2 --batch 32 --epochs 3 --ckpt-every "$EVERY" -q)
echo "processor: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores; np $NP; model $MODEL; checkpoint every $EVERY steps"

hb() { grep -o '"step":[0-9]*' "$1/launch/heartbeat.json" 2>/dev/null | cut -d: -f2 || echo -1; }
num() { grep -o "\"$2\":[-0-9.e+]*" <<<"$1" | head -n 1 | cut -d: -f2; }

trial() { # NAME SIGNAL EXTRA...
    local name=$1 sig=$2 R=$OUT/$1
    shift 2
    local total target mp victim t_kill
    total=$("$CLI" train-pa "${JOB[@]}" --out "$OUT/probe-$name" --epochs 1 >/dev/null 2>&1; grep -o '"step":[0-9]*' "$OUT/probe-$name/metrics.jsonl" | tail -n 1 | cut -d: -f2)
    rm -rf "$OUT/probe-$name"
    target=$((RANDOM % (total * 2) + total / 2))
    "$CLI" launch --np "$NP" --backoff 0 "$@" -- train-pa "${JOB[@]}" --out "$R" >/dev/null 2>"$R.err" &
    local lp=$!
    while [ "$(hb "$R")" -lt "$target" ]; do sleep 0.02; done
    mp=$(grep '"event":"start"' "$R/launch.jsonl" | tail -n 1 | grep -o '"pid":[0-9]*' | cut -d: -f2)
    mapfile -t ranks < <(pgrep -P "$mp")
    victim=${ranks[$((RANDOM % ${#ranks[@]}))]}
    t_kill=$(date +%s.%N)
    kill "-$sig" "$victim"
    wait "$lp" || { echo "$name: launch failed: $(tail -c 500 "$R.err")"; return 1; }
    local ex fs
    ex=$(grep '"event":"exit"' "$R/launch.jsonl" | head -n 1)
    fs=$(grep '"event":"first_step"' "$R/launch.jsonl" | sed -n 2p)
    awk -v n="$name" -v tk="$t_kill" -v te="$(num "$ex" time)" -v tf="$(num "$fs" time)" \
        -v lost="$(num "$fs" time_lost_s)" -v redo="$(num "$(grep "\"event\":\"checkpoint\"" "$R/launch.jsonl" | head -n 1)" steps_redone)" \
        'BEGIN { printf "| %s | %.2f | %.2f | %.2f | %s |\n", n, te - tk, tf - te, lost, redo }' | tee -a "$OUT/rows"
}

echo
echo "| trial | detection s | restart s | time lost s | steps redone |"
echo "|---|---|---|---|---|"
for k in $(seq 1 "$TRIALS"); do trial "kill$k" 9; done
trial hang STOP --hang-timeout "$HANG"
step_s=$(grep -o '"time_s":[0-9.e-]*' "$OUT/kill1/metrics.jsonl" | head -n 1 | cut -d: -f2)
steps=$(grep -o '"step":[0-9]*' "$OUT/kill1/metrics.jsonl" | head -n 1 | cut -d: -f2)
grep '^| kill' "$OUT/rows" | awk -F'|' -v s="$step_s" -v n="$steps" '
    { d[NR] = $3; r[NR] = $4; l[NR] = $5 }
    function med(a, k,   i, j, t) { for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
                                     return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
    END { printf "\nkill -9, median of %d: detection %.2f s, restart %.2f s, time lost %.2f s; the job: %.2f ms a step (epoch 1: %.2f s for %d steps)\n",
                 NR, med(d, NR), med(r, NR), med(l, NR), 1000 * s / n, s, n }'
