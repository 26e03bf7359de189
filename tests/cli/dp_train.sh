#!/bin/bash
# Data-parallel training through the command line (mpirun -np N distdpd train-pa/train-dpd)
# on a tiny simulated data set: N = 2 and 3 ranks (ring, tree, rhd, mpi) reproduce the
# one-process run (eval of last.ckpt within 0.01 dB / relative loss 1e-5); only rank 0
# prints (one summary, one line per epoch) and writes RUN (with dp_steps.csv, one line per
# step, and parallel.json); a checkpoint written by 2 ranks resumes on 3 and on 1 and equals
# a straight one-process run; train-dpd (direct learning) on 2 ranks equals one process;
# usage errors are printed once with exit status 2; an error on one rank (fault
# injection) aborts every rank with the rank named, without hanging; SIGUSR1 to mpirun
# (which forwards it) stops all ranks after the same step with a checkpoint that resumes.
set -euo pipefail
source "$(dirname "$0")/common.bash"

mpi_setup

small_sim # D=$TMP/sim: 12,000 samples, Wiener-Hammerstein PA
SMALL=(--model gru --hidden 6 --frame 32 --stride 4 --batch 30 --lr 2e-2)

# ---- reference: one process
run train-pa --data "$D" "${SMALL[@]}" --epochs 2 --out "$TMP/one" -q
expect_rc 0 "train-pa, one process"
REF=$(ev "$TMP/one")

# ---- 2 and 3 ranks with several allreduce algorithms
for spec in "2 ring 4" "3 tree 0" "3 rhd 0.0001" "2 mpi 4"; do
    read -r np algo bmb <<<"$spec"
    mrun "$np" train-pa --data "$D" "${SMALL[@]}" --epochs 2 --out "$TMP/dp_${np}_$algo" --progress lines \
        --allreduce "$algo" --bucket-mb "$bmb"
    expect_rc 0 "mpirun -np $np train-pa --allreduce $algo"
    same_metrics "$REF" "$(ev "$TMP/dp_${np}_$algo")" "$np ranks, $algo vs one process"
    n=$(grep -c "best epoch" <<<"$OUT" || true)
    if [ "$n" -eq 1 ]; then pass; else fail "$np ranks: $n summaries on stdout, want 1 (only rank 0 prints)"; fi
    n=$(grep -c "^epoch " <<<"$ERR" || true)
    if [ "$n" -eq 2 ]; then pass; else fail "$np ranks: $n epoch lines, want 2"; fi
    has "$ERR" "$np ranks: step" "per-epoch communication line"
    has "$OUT" "parallel:   $np ranks, allreduce $algo" "parallel summary"
    P=$(cat "$TMP/dp_${np}_$algo/parallel.json")
    near "$(json_num "$P" ranks)" "$np" 0 "parallel.json ranks"
    has "$P" "\"allreduce\":	\"$algo\"" "parallel.json algorithm"
    steps=$(json_num "$P" steps)
    lines=$(($(wc -l <"$TMP/dp_${np}_$algo/dp_steps.csv") - 1))
    if [ "$lines" -eq "$steps" ] && [ "$steps" -gt 0 ]; then pass; else fail "dp_steps.csv has $lines steps, parallel.json $steps"; fi
    has "$(head -n 1 "$TMP/dp_${np}_$algo/dp_steps.csv")" "epoch,batch,step_s,comm_s,exposed_s,hidden_s" "dp_steps.csv header"
done
hasnot "$(ls "$TMP/one")" "dp_steps.csv" "one process writes no dp_steps.csv"

# ---- resume N -> M: epoch 1 on 2 ranks, epoch 2 on 3 ranks (and on 1 process)
mrun 2 train-pa --data "$D" "${SMALL[@]}" --epochs 1 --out "$TMP/r2" -q
expect_rc 0 "epoch 1 on 2 ranks"
cp -r "$TMP/r2" "$TMP/r1"
mrun 3 train-pa --resume "$TMP/r2" --epochs 2 -q --allreduce tree
expect_rc 0 "resume on 3 ranks"
same_metrics "$REF" "$(ev "$TMP/r2")" "2 -> 3 ranks resume vs one process"
run train-pa --resume "$TMP/r1" --epochs 2 -q
expect_rc 0 "resume on one process"
same_metrics "$REF" "$(ev "$TMP/r1")" "2 ranks -> 1 process resume vs one process"

# ---- train-dpd (direct learning through the PA run's model) on 2 ranks
DPD=(--model gru --hidden 4 --frame 32 --stride 4 --batch 30 --lr 1e-2 --epochs 1)
run train-dpd --pa-run "$TMP/one" "${DPD[@]}" --out "$TMP/dpd1" -q
expect_rc 0 "train-dpd, one process"
mrun 2 train-dpd --pa-run "$TMP/one" "${DPD[@]}" --out "$TMP/dpd2" -q
expect_rc 0 "mpirun -np 2 train-dpd"
A=$(ev "$TMP/dpd1")
B=$(ev "$TMP/dpd2")
for k in val_aclr_avg_db test_aclr_avg_db true_test_aclr_avg_db; do
    near "$(json_num "$A" "$k")" "$(json_num "$B" "$k")" 0.01 "train-dpd 2 ranks vs one process: $k"
done

# ---- usage errors: printed once (by rank 0), exit status 2
mrun 2 train-pa --data "$D" --frame abc --out "$TMP/bad"
expect_rc 2 "usage error under mpirun"
n=$(grep -c "expected a positive integer" <<<"$ERR" || true)
if [ "$n" -eq 1 ]; then pass; else fail "usage error printed $n times, want 1: $ERR"; fi
run train-pa --data "$D" --allreduce butterfly --out "$TMP/bad"
expect_rc 2 "unknown --allreduce"
has "$ERR" "butterfly" "--allreduce names the value"
has "$ERR" "ring" "--allreduce lists the choices"
run train-pa --data "$D" --bucket-mb -1 --out "$TMP/bad"
expect_rc 2 "negative --bucket-mb"

# ---- an error on one rank aborts all ranks, naming the rank (no hang)
t0=$(date +%s)
DD_DP_FAIL=1:3 mrun 2 train-pa --data "$D" "${SMALL[@]}" --epochs 2 --out "$TMP/inj" -q
t1=$(date +%s)
if [ "$RC" -ne 0 ] && [ "$RC" -ne 124 ]; then pass; else fail "injected failure: exit status $RC"; fi
has "$ERR" "rank 1 of 2: injected failure on rank 1 at step 3" "the failing rank is named"
if [ $((t1 - t0)) -lt 60 ]; then pass; else fail "abort took $((t1 - t0)) s"; fi

# ---- SIGUSR1 to mpirun (forwarded to every rank; mpirun's own SIGTERM kills the job):
# all ranks stop after the same step, rank 0 writes last.ckpt, the run resumes
BIG=(--model gru --hidden 12 --frame 64 --stride 1 --batch 32 --lr 1e-2)
mpirun -np 2 "$DD_CLI" train-pa --data "$D" "${BIG[@]}" --epochs 200 --out "$TMP/sig" --progress lines \
    >"$TMP/sig.out" 2>"$TMP/sig.err" &
MPID=$!
watchdog "$MPID"
for _ in $(seq 1 100); do
    if [ -s "$TMP/sig/metrics.jsonl" ]; then break; fi
    sleep 0.2
done
kill -USR1 "$MPID" 2>/dev/null || true
set +e
wait "$MPID"
RC=$?
set -e
kill "$WATCHDOG" 2>/dev/null || true
if [ "$RC" -eq 75 ]; then pass; else fail "SIGUSR1: exit status $RC, want 75 (preempted); $(tail -n 3 "$TMP/sig.err")"; fi
has "$(cat "$TMP/sig.err")" "interrupted; $TMP/sig/last.ckpt holds the state" "interruption message"
# rank 0 writes parallel.json only after dd_train_run has returned: the clean stop
if [ -s "$TMP/sig/parallel.json" ]; then pass; else fail "no parallel.json: rank 0 did not stop cleanly"; fi
E=$(grep -c . "$TMP/sig/metrics.jsonl")
if [ "$E" -lt 20 ]; then pass; else fail "SIGUSR1 took effect only after $E epochs"; fi
run eval --run "$TMP/sig" --ckpt last --json
expect_rc 0 "the interrupted checkpoint loads"
mrun 2 train-pa --resume "$TMP/sig" --epochs "$(($(json_num "$OUT" epoch) + 1))" -q
expect_rc 0 "resume after SIGUSR1"

finish
