#!/bin/bash
# Preemption of a parallel run by a signal to ONE rank (not mpirun): SIGTERM to rank 1's
# pid alone stops every rank after the same step under data parallelism, ZeRO (--shard
# zero2) and the model-parallel strategy (--pp 2); the run exits 75 ("preempted") through
# mpirun with last.ckpt written and verified (distdpd inspect), the heartbeat file says
# "preempted", and --resume to the end gives the metrics.jsonl of an uninterrupted run in
# every key but the timing ones.
set -euo pipefail
source "$(dirname "$0")/common.bash"

mpi_setup


# a number of the heartbeat file (one line of JSON)
hb_num() { json_num "$(cat "$1" 2>/dev/null || true)" "$2"; }

D=$TMP/sim
run simulate --out "$D" --samples 20000 --pa wiener-hammerstein -q
expect_rc 0 "simulate"
# 6 epochs: after the heartbeat shows step 20, hundreds of steps remain for the SIGTERM to
# land in however late this shell sees it (3 epochs left about 1 s)
SMALL=(--model resnet --hidden 24 --layers 4 --kernel 2 --frame 64 --stride 2 --batch 32 --lr 1e-2 --epochs 6 --no-report)

for spec in "dp|" "zero2|--shard zero2" "pp|--pp 2 --micro 2"; do
    name=${spec%%|*}
    read -r -a SOPT <<<"${spec#*|}"
    S=$TMP/straight_$name
    K=$TMP/killed_$name
    HB=$TMP/hb_$name.json
    mrun 2 train-pa --data "$D" "${SMALL[@]}" "${SOPT[@]}" --out "$S" -q
    expect_rc 0 "$name: straight run ($ERR)"
    steps=$(json_num "$(tail -n 1 "$S/metrics.jsonl")" step)

    DISTDPD_HEARTBEAT=$HB mpirun -np 2 "$DD_CLI" train-pa --data "$D" "${SMALL[@]}" "${SOPT[@]}" --out "$K" -q \
        >"$TMP/k.out" 2>"$TMP/k.err" &
    MPID=$!
    watchdog "$MPID"
    # wait for training (the heartbeat's step), then SIGTERM to rank 1's process only
    for _ in $(seq 1 600); do
        s=$(hb_num "$HB" step)
        if [ -n "$s" ] && [ "$s" -ge 20 ]; then break; fi
        sleep 0.05
    done
    r1=""
    for p in $(pgrep -P "$MPID" || true); do
        if grep -qx "OMPI_COMM_WORLD_RANK=1" <<<"$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null)"; then r1=$p; fi
    done
    if [ -n "$r1" ]; then pass; else fail "$name: rank 1's pid not found among mpirun's children"; fi
    [ -n "$r1" ] && kill -TERM "$r1"
    set +e
    wait "$MPID"
    RC=$?
    set -e
    kill "$WATCHDOG" 2>/dev/null || true
    ERR=$(cat "$TMP/k.err")
    expect_rc 75 "$name: SIGTERM to rank 1 alone: exit status (preempted)"
    has "$ERR" "interrupted; $K/last.ckpt holds the state: continue with 'distdpd train-pa --resume $K'" \
        "$name: the message says how to resume"
    has "$(cat "$HB")" '"state":"preempted"' "$name: heartbeat state"
    has "$(cat "$HB")" '"world_size":2' "$name: heartbeat world size"
    run inspect "$K/last.ckpt"
    expect_rc 0 "$name: last.ckpt verifies ($ERR)"
    at=$(hb_num "$HB" step)
    if [ -n "$at" ] && [ "$at" -lt "$steps" ]; then pass; else fail "$name: stopped at step '$at' of $steps"; fi
    run inspect --json "$K/last.ckpt"
    ckstep=$(json_num "$OUT" step)
    if [ "$ckstep" = "$at" ]; then pass; else fail "$name: last.ckpt holds step $ckstep, the heartbeat says $at"; fi

    mrun 2 train-pa --resume "$K" "${SOPT[@]}" -q
    expect_rc 0 "$name: resume to the end ($ERR)"
    # the model-parallel strategy's comm_bytes_per_step of the epoch resumed in its middle
    # counts only the steps after the resume (a statistic, not training): not compared
    cmp_keys() { if [ "$name" = pp ]; then untimed "$1" | sed 's/"comm_bytes_per_step":[^,]*,//'; else untimed "$1"; fi; }
    if [ "$(cmp_keys "$S/metrics.jsonl")" = "$(cmp_keys "$K/metrics.jsonl")" ]; then pass; else
        fail "$name: resumed metrics.jsonl differs from the straight run's: $(diff <(cmp_keys "$S/metrics.jsonl") <(cmp_keys "$K/metrics.jsonl") | head -c 1500)"
    fi
done

finish
