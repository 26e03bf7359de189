#!/bin/bash
# A data-parallel run that dies between checkpoints (fault injection on one rank, which
# takes every rank down as a kill would) and is resumed gives the same metrics.jsonl as a
# straight run in every key but the timing ones (comm_bytes_per_step and
# compression_ratio included: 2 ranks uncompressed and with dgc, one process with int8),
# and its dp_steps.csv has exactly one row per step, the rows up to the last checkpoint
# having reached the file before the crash. Under mpirun a second run into a directory
# that is training is refused by rank 0 and every rank ends, without hanging.
set -euo pipefail
source "$(dirname "$0")/common.bash"

mpi_setup
# the (epoch, batch) columns of dp_steps.csv
steps_of() { cut -d, -f1,2 "$1"; }

small_sim # D=$TMP/sim: 12,000 samples, Wiener-Hammerstein PA
# 60 batches per epoch, last.ckpt every 7 steps: the crash at step 80 comes 3 steps after
# the checkpoint of step 77 (epoch 2, batch 17)
SMALL=(--model gru --hidden 6 --frame 32 --stride 4 --batch 30 --lr 2e-2 --epochs 2 --ckpt-every 7)

for spec in "2 1:80 none" "2 1:80 dgc,density=0.05" "1 0:80 int8"; do
    read -r np inj comp <<<"$spec"
    name="$np ranks, --compress $comp"
    S=$TMP/straight_${np}_${comp%%,*}
    K=$TMP/killed_${np}_${comp%%,*}
    mrun "$np" train-pa --data "$D" "${SMALL[@]}" --compress "$comp" --out "$S" -q
    expect_rc 0 "$name: straight run"
    DD_DP_FAIL=$inj mrun "$np" train-pa --data "$D" "${SMALL[@]}" --compress "$comp" --out "$K" -q
    if [ "$RC" -ne 0 ] && [ "$RC" -ne 124 ]; then pass; else fail "$name: injected failure: exit status $RC"; fi
    has "$ERR" "injected failure" "$name: the run died at the injected failure"
    # the rows of the steps up to the checkpoint reached the file before the crash
    rows=$(($(wc -l <"$K/dp_steps.csv") - 1))
    if [ "$rows" -ge 77 ]; then pass; else fail "$name: dp_steps.csv has $rows rows after the crash, want >= 77"; fi
    # --compress again: parallel.json is written at the end of a run, the crashed run has none
    mrun "$np" train-pa --resume "$K" --compress "$comp" -q
    expect_rc 0 "$name: resume"
    if [ "$(untimed "$S/metrics.jsonl")" = "$(untimed "$K/metrics.jsonl")" ]; then pass; else
        fail "$name: resumed metrics.jsonl differs from the straight run's: $(diff <(untimed "$S/metrics.jsonl") <(untimed "$K/metrics.jsonl") | head -c 1500)"
    fi
    rows=$(($(wc -l <"$K/dp_steps.csv") - 1))
    if [ "$rows" -eq 120 ]; then pass; else fail "$name: resumed dp_steps.csv has $rows rows, want 120 (one per step)"; fi
    if [ "$(steps_of "$S/dp_steps.csv")" = "$(steps_of "$K/dp_steps.csv")" ]; then pass; else
        fail "$name: dp_steps.csv steps differ: $(diff <(steps_of "$S/dp_steps.csv") <(steps_of "$K/dp_steps.csv") | head -c 600)"
    fi
done
grep -q '"comm_bytes_per_step":0,' "$TMP/killed_1_int8/metrics.jsonl" && pass ||
    fail "one process: comm_bytes_per_step 0 lost on resume: $(head -n 1 "$TMP/killed_1_int8/metrics.jsonl")"

# ---- a second mpirun into a directory that is training: refused on rank 0, no hang
BIG=(--model gru --hidden 12 --frame 64 --stride 1 --batch 32 --lr 1e-2)
mpirun -np 2 "$DD_CLI" train-pa --data "$D" "${BIG[@]}" --epochs 1000 --out "$TMP/busy" -q >/dev/null 2>"$TMP/busy.err" &
MPID=$!
(
    for _ in $(seq 1 1200); do
        kill -0 "$MPID" 2>/dev/null || exit 0
        sleep 0.1
    done
    kill -KILL "$MPID"
) >/dev/null 2>&1 &
for _ in $(seq 1 300); do
    if [ -s "$TMP/busy/config.json" ]; then break; fi
    sleep 0.1
done
t0=$(date +%s)
mrun 2 train-pa --data "$D" "${BIG[@]}" --epochs 1 --out "$TMP/busy" -q
t1=$(date +%s)
if [ "$RC" -ne 0 ] && [ "$RC" -ne 124 ]; then pass; else fail "second mpirun into a training run: exit status $RC"; fi
has "$ERR" "rank 0 of 2: $TMP/busy is in use by pid" "the refusal names the owner"
if [ $((t1 - t0)) -lt 60 ]; then pass; else fail "the refusal took $((t1 - t0)) s"; fi
kill -0 "$MPID" 2>/dev/null && pass || fail "the first run died"
kill -USR1 "$MPID" 2>/dev/null || true
set +e
wait "$MPID"
RC=$?
set -e
expect_rc 75 "the first run stops on SIGUSR1 (preempted)"

finish
