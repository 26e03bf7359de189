#!/bin/bash
# Periodic, asynchronous checkpoints and what a supervisor reads (one process and 2
# ranks): --ckpt-every-steps (alias --ckpt-every), --ckpt-every-s and --keep-last K
# (RUN/ckpt/step-NNNNNNNNNN.ckpt, the newest K kept, last.ckpt a hard link to the newest,
# each verified by distdpd inspect); checkpointing does not change training (metrics.jsonl
# equal to a run without periodic checkpoints in every key but the timing ones);
# metrics.jsonl lines carry restart (DISTDPD_RESTART), world_size, lr, ckpt_stall_s and
# ckpt_write_s; the heartbeat file (DISTDPD_HEARTBEAT) is one line of JSON, "train" while
# training and "done" at the end; the options are configuration (config.json, refused
# with --resume) and bad values are usage errors naming the option or variable.
set -euo pipefail
source "$(dirname "$0")/common.bash"

norestart() { sed 's/"restart":[0-9]*,//' ; }
# the steps of the checkpoints that -v -v logged in $ERR, one a line
ckpt_steps() { grep -o "checkpoint at step [0-9]*" <<<"$ERR" | awk '{ print $4 }' || true; }

small_sim # D=$TMP/sim: 12,000 samples, Wiener-Hammerstein PA
# 72 steps per epoch
SMALL=(--model gru --hidden 4 --frame 50 --stride 5 --batch 20 --lr 1e-2 --epochs 2 --no-report)

# ---- usage errors
for bad in "--keep-last 0|--keep-last: must be in [1, 1000000], got '0'" \
    "--keep-last x|--keep-last: expected a positive integer" \
    "--ckpt-every-s -1|--ckpt-every-s: must be in" \
    "--ckpt-every-s abc|--ckpt-every-s:" \
    "--ckpt-every-steps 1.5|--ckpt-every-steps:"; do
    read -r -a A <<<"${bad%%|*}"
    run train-pa --data "$D" "${SMALL[@]}" "${A[@]}" --out "$TMP/bad"
    expect_rc 2 "${bad%%|*}"
    has "$ERR" "${bad#*|}" "${bad%%|*}: message"
done
DISTDPD_RESTART=abc run train-pa --data "$D" "${SMALL[@]}" --out "$TMP/bad"
expect_rc 2 "DISTDPD_RESTART=abc"
has "$ERR" "DISTDPD_RESTART: expected a non-negative integer, got 'abc'" "DISTDPD_RESTART named"
DISTDPD_RESTART=-1 run train-pa --data "$D" "${SMALL[@]}" --out "$TMP/bad"
expect_rc 2 "DISTDPD_RESTART=-1"
DISTDPD_HEARTBEAT=$TMP/no/such/dir/hb run train-pa --data "$D" "${SMALL[@]}" --out "$TMP/bad"
expect_rc 1 "a heartbeat in a missing directory"
has "$ERR" "DISTDPD_HEARTBEAT: heartbeat file $TMP/no/such/dir/hb: its directory $TMP/no/such/dir does not exist" \
    "the heartbeat error names the variable and the file"
if [ ! -e "$TMP/bad/last.ckpt" ]; then pass; else fail "a refused run trained"; fi

# ---- the reference: no periodic checkpoints
run train-pa --data "$D" "${SMALL[@]}" --out "$TMP/ref" -q
expect_rc 0 "reference run"

# ---- every 10 steps, the newest 3 kept, restart 2, heartbeat
HB=$TMP/hb.json
DISTDPD_RESTART=2 DISTDPD_HEARTBEAT=$HB run train-pa --data "$D" "${SMALL[@]}" --ckpt-every-steps 10 --keep-last 3 \
    --out "$TMP/k3" -q
expect_rc 0 "--ckpt-every-steps 10 --keep-last 3"
if [ "$(untimed "$TMP/ref/metrics.jsonl")" = "$(untimed "$TMP/k3/metrics.jsonl" | sed 's/"restart":2,/"restart":0,/')" ]; then
    pass
else
    fail "periodic checkpoints changed training: $(diff <(untimed "$TMP/ref/metrics.jsonl") <(untimed "$TMP/k3/metrics.jsonl") | head -c 1200)"
fi
files=$(cd "$TMP/k3/ckpt" && ls)
# steps 130, 140 and the end of epoch 2 (144)
if [ "$files" = "$(printf 'step-0000000130.ckpt\nstep-0000000140.ckpt\nstep-0000000144.ckpt')" ]; then pass; else
    fail "--keep-last 3 kept: $files"
fi
for f in "$TMP"/k3/ckpt/*.ckpt "$TMP/k3/last.ckpt" "$TMP/k3/best.ckpt"; do
    run inspect "$f"
    expect_rc 0 "$f verifies ($ERR)"
done
run inspect --json "$TMP/k3/last.ckpt"
if [ "$(json_num "$OUT" step)" = 144 ]; then pass; else fail "last.ckpt holds step $(json_num "$OUT" step), want 144"; fi
if [ "$(stat -c %i "$TMP/k3/last.ckpt")" = "$(stat -c %i "$TMP/k3/ckpt/step-0000000144.ckpt")" ]; then pass; else
    fail "last.ckpt is not a hard link to the newest step file"
fi
if [ -z "$(find "$TMP/k3" -name '*.tmp.*')" ]; then pass; else fail "temporary files left: $(find "$TMP/k3" -name '*.tmp.*')"; fi
L=$(head -n 1 "$TMP/k3/metrics.jsonl")
for k in '"restart":2,' '"world_size":1,' '"lr":' '"ckpt_stall_s":' '"ckpt_write_s":'; do has "$L" "$k" "metrics.jsonl: $k"; done
for k in ckpt_stall_s ckpt_write_s; do
    v=$(json_num "$L" "$k")
    if [ -n "$v" ] && awk -v v="$v" 'BEGIN { exit !(v >= 0 && v < 10) }'; then pass; else fail "metrics.jsonl $k '$v'"; fi
done
H=$(cat "$HB")
if [ "$(wc -l <"$HB")" -eq 1 ]; then pass; else fail "heartbeat: $(wc -l <"$HB") lines"; fi
for k in '"pid":' '"step":144,' '"epoch":2,' '"time":' '"step_s":' '"world_size":1,' '"state":"done"'; do
    has "$H" "$k" "heartbeat: $k"
done
now=$(date +%s)
t=$(json_num "$H" time)
if awk -v t="$t" -v n="$now" 'BEGIN { exit !(t > n - 60 && t <= n + 1) }'; then pass; else fail "heartbeat time $t, now $now"; fi
grep -q '"ckpt_every":	"10"' "$TMP/k3/config.json" && grep -q '"keep_last":	3' "$TMP/k3/config.json" && pass ||
    fail "config.json lacks ckpt_every / keep_last"

# ---- configuration: refused with --resume; --ckpt-every is the alias
for o in "--keep-last 2" "--ckpt-every-s 5" "--ckpt-every-steps 3" "--ckpt-every 3"; do
    read -r -a A <<<"$o"
    run train-pa --resume "$TMP/k3" --epochs 3 "${A[@]}"
    expect_rc 2 "$o with --resume"
    has "$ERR" "${A[0]} cannot be given with --resume" "$o with --resume: message"
done
run train-pa --data "$D" "${SMALL[@]}" --ckpt-every 10 --keep-last 3 --out "$TMP/alias" -q
expect_rc 0 "--ckpt-every 10"
if [ "$(cd "$TMP/alias/ckpt" && ls)" = "$files" ]; then pass; else fail "--ckpt-every 10 kept $(cd "$TMP/alias/ckpt" && ls)"; fi

# ---- the heartbeat while training: "train", its time moving on; a resume continues the
# step files and keeps K of them
DISTDPD_HEARTBEAT=$HB "$DD_CLI" train-pa --resume "$TMP/k3" --epochs 400 -q 2>/dev/null &
PID=$!
seen=""
for _ in $(seq 1 3000); do # at most 60 s
    if grep -q '"state":"train"' "$HB" 2>/dev/null; then seen=$(cat "$HB"); break; fi
    sleep 0.02
done
if [ -n "$seen" ]; then pass; else fail "no \"train\" heartbeat: $(cat "$HB")"; fi
t1=$(json_num "$seen" time)
for _ in $(seq 1 300); do # rewritten every 0.2 s or so: at most 30 s
    sleep 0.1
    t2=$(json_num "$(cat "$HB")" time)
    awk -v a="$t1" -v b="$t2" 'BEGIN { exit !(b > a) }' && break
done
if awk -v a="$t1" -v b="$t2" 'BEGIN { exit !(b > a) }'; then pass; else fail "heartbeat time did not move: $t1 -> $t2"; fi
kill -TERM "$PID"
set +e
wait "$PID"
RC=$?
set -e
expect_rc 75 "SIGTERM: preempted"
has "$(cat "$HB")" '"state":"preempted"' "heartbeat after SIGTERM"
n=$(find "$TMP/k3/ckpt" -name 'step-*.ckpt' | wc -l)
if [ "$n" -eq 3 ]; then pass; else fail "$n step files after the resume, want 3"; fi
run inspect --json "$TMP/k3/last.ckpt"
expect_rc 0 "last.ckpt after SIGTERM"
newest=$(cd "$TMP/k3/ckpt" && ls | tail -n 1)
has "$newest" "$(printf 'step-%010d.ckpt' "$(json_num "$OUT" step)")" "last.ckpt is the newest step file"

# ---- --ckpt-every-s on 2 ranks (rank 0's clock, agreed by every rank). What is asserted
# depends only on each run's own timings (ctest -j2 on 2 cores can slow one run 5x and not
# the next): an interval shorter than any step checkpoints after every step, one longer
# than the run only at the epoch ends, and a measured one checkpoints inside an epoch
# that lasted more than twice the interval and never more often than the interval allows.
# Training is the same as without.
if command -v mpirun >/dev/null 2>&1; then
    mpi_setup
    mrun 2 train-pa --data "$D" "${SMALL[@]}" --out "$TMP/s_small" -q
    expect_rc 0 "2 ranks, reference (small)"
    # 1 ns: due after every one of the 144 steps
    mrun 2 train-pa --data "$D" "${SMALL[@]}" --ckpt-every-s 1e-9 --keep-last 1000 --out "$TMP/s_all" --progress none -v -v
    expect_rc 0 "2 ranks, --ckpt-every-s 1e-9"
    at=$(ckpt_steps | tr '\n' ' ')
    if [ "$at" = "$(seq -s ' ' 1 144) " ]; then pass; else fail "--ckpt-every-s 1e-9: checkpoints at steps $at (want 1..144)"; fi
    nf=$(find "$TMP/s_all/ckpt" -name 'step-*.ckpt' | wc -l)
    if [ "$nf" -eq 144 ]; then pass; else fail "--ckpt-every-s 1e-9: $nf step files, want 144"; fi
    if [ "$(untimed "$TMP/s_small/metrics.jsonl")" = "$(untimed "$TMP/s_all/metrics.jsonl")" ]; then pass; else
        fail "--ckpt-every-s 1e-9 changed training: $(diff <(untimed "$TMP/s_small/metrics.jsonl") <(untimed "$TMP/s_all/metrics.jsonl") | head -c 1200)"
    fi
    # 1e9 s: only the two epoch-end checkpoints
    mrun 2 train-pa --data "$D" "${SMALL[@]}" --ckpt-every-s 1e9 --keep-last 1000 --out "$TMP/s_none" --progress none -v -v
    expect_rc 0 "2 ranks, --ckpt-every-s 1e9"
    at=$(ckpt_steps | tr '\n' ' ')
    if [ "$at" = "72 144 " ]; then pass; else fail "--ckpt-every-s 1e9: checkpoints at steps $at (want 72 144)"; fi

    BIGGER=(--model gru --hidden 12 --frame 50 --stride 1 --batch 20 --lr 1e-2 --epochs 2 --no-report)
    mrun 2 train-pa --data "$D" "${BIGGER[@]}" --out "$TMP/s_ref" -q
    expect_rc 0 "2 ranks, reference"
    # The interval: a tenth of the reference's first epoch (about 20 intervals in 2 epochs
    # at the reference's speed).
    first=$(head -n 1 "$TMP/s_ref/metrics.jsonl")
    spe=$(json_num "$first" step)
    EVERY=$(awk -v t="$(json_num "$first" time_s)" 'BEGIN { printf "%.6g", t / 10 }')
    mrun 2 train-pa --data "$D" "${BIGGER[@]}" --ckpt-every-s "$EVERY" --keep-last 1000 --out "$TMP/s_t" --progress none -v -v
    expect_rc 0 "2 ranks, --ckpt-every-s $EVERY"
    at=$(ckpt_steps)
    n=$(grep -c . <<<"$at" || true)
    nf=$(find "$TMP/s_t/ckpt" -name 'step-*.ckpt' | wc -l)
    if [ "$nf" -eq "$n" ]; then pass; else fail "--ckpt-every-s $EVERY: $n checkpoints logged, $nf step files"; fi
    # this run's own epoch times (training, and the evaluation after it)
    L1=$(sed -n 1p "$TMP/s_t/metrics.jsonl")
    L2=$(sed -n 2p "$TMP/s_t/metrics.jsonl")
    T1=$(json_num "$L1" time_s) E1=$(json_num "$L1" eval_time_s) T2=$(json_num "$L2" time_s) E2=$(json_num "$L2" eval_time_s)
    inside1=$(awk -v e="$spe" '$1 < e' <<<"$at" | wc -l)
    inside2=$(awk -v e="$spe" '$1 > e && $1 < 2 * e' <<<"$at" | wc -l)
    for ep in 1 2; do
        if [ $ep = 1 ]; then t=$T1 k=$inside1; else t=$T2 k=$inside2; fi
        if awk -v t="$t" -v v="$EVERY" 'BEGIN { exit !(t > 2 * v) }'; then
            if [ "$k" -ge 1 ]; then pass; else
                fail "--ckpt-every-s $EVERY: epoch $ep took $t s and has no checkpoint inside ($spe steps each): $(tr '\n' ' ' <<<"$at")"
            fi
        else
            echo "note: epoch $ep took $t s, not more than twice the interval $EVERY s: no checkpoint inside it is required"
        fi
    done
    # a timed checkpoint needs the interval to have passed since the last checkpoint: at
    # most one per interval of the run's training and evaluation time (half as much again
    # for the set-up and the checkpoint stalls outside those), plus the two at the epoch
    # ends; a clock that is not reset would give one after every step
    max=$(awk -v a="$T1" -v b="$E1" -v c="$T2" -v d="$E2" -v v="$EVERY" 'BEGIN { printf "%d", 1.5 * (a + b + c + d) / v + 3 }')
    if [ "$n" -le "$max" ] && [ "$n" -ge 2 ]; then pass; else
        fail "--ckpt-every-s $EVERY: $n checkpoints in $T1 + $E1 + $T2 + $E2 s (want 2 to $max)"
    fi
    if [ "$(untimed "$TMP/s_ref/metrics.jsonl")" = "$(untimed "$TMP/s_t/metrics.jsonl")" ]; then pass; else
        fail "--ckpt-every-s changed training: $(diff <(untimed "$TMP/s_ref/metrics.jsonl") <(untimed "$TMP/s_t/metrics.jsonl") | head -c 1200)"
    fi
    has "$(head -n 1 "$TMP/s_t/metrics.jsonl")" '"world_size":2,' "metrics.jsonl: world_size 2"
else
    echo "note: mpirun not found: the 2-rank part is skipped"
fi

finish
