#!/bin/bash
# distdpd launch: usage errors; a rank killed -9 from outside at a random step (3 trials
# here, 20 in launch_faults_slow.sh) is restarted from the newest checkpoint and the run
# ends exactly as an uninterrupted one; a rank that fails every time exhausts
# --max-restarts with a clear message; a corrupt last.ckpt is passed over for the
# newest step checkpoint that verifies; launch.jsonl records every start and exit.
set -euo pipefail
source "$(dirname "$0")/common.bash"
source "$(dirname "$0")/launch_common.bash"
mpi_setup

# ---- usage errors (exit 2, nothing started)
run launch -- train-pa --out "$TMP/u"
expect_rc 2 "no --np"
has "$ERR" "--np N (or --hostfile / --discover" "no --np: message"
run launch --np 2
expect_rc 2 "no command"
has "$ERR" "no training command" "no command: message"
run launch --np 0 -- train-pa --out "$TMP/u"
expect_rc 2 "--np 0"
has "$ERR" "--np: expected N or MIN:MAX with 1 <= MIN <= MAX, got '0'" "--np 0: message"
run launch --np 3:2 -- train-pa --out "$TMP/u"
expect_rc 2 "--np 3:2"
run launch --np 2 -- eval --run x
expect_rc 2 "not a training command"
has "$ERR" "must be train-pa or train-dpd, got 'eval'" "eval: message"
run launch --np 2 -- train-pa --data x
expect_rc 2 "no run directory"
has "$ERR" "needs --out RUN" "no --out: message"
run launch --np 1 -- train-pa --out "$TMP/u" --pp 2
expect_rc 2 "--np below one replica"
has "$ERR" "--np 1 is fewer ranks than one replica of --tp x --pp (2)" "--pp 2 at np 1: message"
run launch --hostfile a --discover b -- train-pa --out "$TMP/u"
expect_rc 2 "--hostfile with --discover"
run launch --np 2 --hang-timeout abc -- train-pa --out "$TMP/u"
expect_rc 2 "--hang-timeout abc"
printf 'localhost slots=x\n' >"$TMP/badhosts"
run launch --hostfile "$TMP/badhosts" -- train-pa --out "$TMP/bh" --data x
expect_rc 1 "bad hostfile"
has "$ERR" "badhosts:1: slots must be an integer in [1, 65536], got 'x'" "bad hostfile: message names file and line"
# the job's own usage error is not retried
run launch --np 1 --max-restarts 5 -- train-pa --data "$D" --out "$TMP/ue" --frame 0
expect_rc 2 "the job's usage error"
has "$ERR" "not restarting" "usage error: not restarted"
if [ "$(grep -c '"event":"start"' "$TMP/ue/launch.jsonl")" = 1 ]; then pass; else fail "usage error: started more than once"; fi

# ---- kill -9 of a random rank at a random step: the job completes, equal to a straight run
mrun 2 train-pa --data "$D" "${JOB[@]}" --out "$TMP/straight" -q
expect_rc 0 "straight run"
for trial in 1 2 3; do
    kill_trial "$trial" 2
done

# ---- the restart budget: a rank that fails at step 30 every time
DD_DP_FAIL=1:30 run launch --np 2 --max-restarts 2 --backoff 0.05 -- train-pa --data "$D" "${JOB[@]}" --out "$TMP/budget"
expect_rc 1 "always failing: exit 1"
has "$ERR" "giving up after 2 restart(s) (--max-restarts 2): the last start ended: failed: mpirun exit status" "budget: message"
if [ "$(grep -c '"event":"start"' "$TMP/budget/launch.jsonl")" = 3 ]; then pass; else fail "budget: $(grep -c '"event":"start"' "$TMP/budget/launch.jsonl") starts, want 3"; fi
has "$(cat "$TMP/budget/launch.jsonl")" '"event":"gave_up","restarts":2' "budget: gave_up event"

# ---- a corrupt last.ckpt: the launcher resumes from the newest step file that verifies
# (a job that stopped at step 40 with step files kept; last.ckpt's data then damaged)
run train-pa --data "$D" "${JOB[@]}" --keep-last 3 --out "$TMP/corrupt" -q --epochs 1
expect_rc 0 "one epoch with step files"
newest=$(ls "$TMP/corrupt/ckpt" | tail -n 1)
cp --remove-destination "$TMP/corrupt/last.ckpt" "$TMP/corrupt/last.copy" # break the hard link
mv "$TMP/corrupt/last.copy" "$TMP/corrupt/last.ckpt"
printf 'garbage' | dd of="$TMP/corrupt/last.ckpt" bs=1 seek=300 conv=notrunc status=none
rm -f "$TMP/corrupt/ckpt/$newest"
run launch --np 2 --backoff 0 -- train-pa --data "$D" "${JOB[@]}" --keep-last 3 --out "$TMP/corrupt" -q
expect_rc 0 "corrupt last.ckpt: completes"
has "$ERR" "did not verify; resuming from" "corrupt: says so"
if ls "$TMP/corrupt"/last.ckpt.bad-* >/dev/null 2>&1; then pass; else fail "corrupt: the damaged last.ckpt is not kept aside"; fi
has "$(cat "$TMP/corrupt/launch.jsonl")" '"rejected":1' "corrupt: launch.jsonl counts the rejected file"

finish
