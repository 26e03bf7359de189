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
# a run directory made by hand with no checkpoint is not the launcher's: refused, untouched
mkdir -p "$TMP/handmade"
cp "$TMP/straight/config.json" "$TMP/handmade/"
run launch --np 2 -- train-pa --data "$D" "${JOB[@]}" --out "$TMP/handmade" -q
expect_rc 1 "a run without a checkpoint that no launcher started"
has "$ERR" "holds a run (config.json) without a checkpoint that verifies, and no launcher started it" "handmade: message"
if [ "$(ls -A "$TMP/handmade")" = "config.json" ]; then pass; else fail "handmade: the directory changed: $(ls -A "$TMP/handmade")"; fi
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

# ---- without a launcher, a stopped rank ends the job instead of hanging it: every wait
# of the comm layer has a timeout (DISTDPD_COMM_TIMEOUT, here 2 s)
R=$TMP/ctimeout
# (60 epochs, about 20 s: the stop lands in training however late this shell gets to it;
# the comm timeout ends the job 2 s after it)
DISTDPD_COMM_TIMEOUT=2 DISTDPD_HEARTBEAT=$TMP/ct_hb.json timeout 120 mpirun -np 2 "$DD_CLI" train-pa --data "$D" \
    "${JOB[@]}" --epochs 60 --out "$R" -q >/dev/null 2>"$TMP/ct.err" &
mp=$!
for _ in $(seq 1 3000); do # at most 60 s
    [ -n "$(json_num "$(cat "$TMP/ct_hb.json" 2>/dev/null || true)" step)" ] && break
    sleep 0.02
done
r0=$(json_num "$(cat "$TMP/ct_hb.json" 2>/dev/null || true)" pid)
victim=$(pgrep -x distdpd | grep -vx "${r0:-0}" | while read -r p; do
    if grep -qF -- "--out $R " <<<"$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"; then echo "$p"; fi
done | head -n 1)
if [ -n "$victim" ]; then pass; else fail "comm timeout: no heartbeat or no rank 1 process within 60 s"; fi
t0=$(date +%s)
[ -n "$victim" ] && kill -STOP "$victim"
set +e
wait "$mp"
rc=$?
set -e
kill -CONT "$victim" 2>/dev/null || true
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; then pass; else fail "comm timeout: exit status $rc (124: the job hung)"; fi
near "$(($(date +%s) - t0))" 0 30 "comm timeout: the job ended within 30 s of the stop"
has "$(cat "$TMP/ct.err")" "no answer for" "comm timeout: rank 0 says it waited"
has "$(cat "$TMP/ct.err")" "(DISTDPD_COMM_TIMEOUT)" "comm timeout: the message names the variable"

# ---- rescaling: --rescale-batch on a resume (the trainer), then --rescale linear-lr
run train-pa --data "$D" "${JOB[@]}" --out "$TMP/nr" --rescale-batch 60
expect_rc 2 "--rescale-batch without --resume"
has "$ERR" "--rescale-batch rescales a run on --resume" "--rescale-batch: message"
run launch --np 2 --rescale linear-lr -- train-pa --data "$D" --out "$TMP/nr" --pp 2
expect_rc 2 "linear-lr with --pp"
has "$ERR" "--rescale linear-lr does not apply to a --tp/--pp job" "linear-lr with --pp: message"
# a run stopped by SIGTERM in epoch 2 (239 steps an epoch), resumed with batch 60: epoch
# 2 ends with batch 30, the next ones take 120 steps at twice the learning rate. Hidden
# 256 (7.3 ms a step on a Zen 5 core, 1.7 s an epoch; the job's hidden 16 takes 0.7 ms):
# the heartbeat is rewritten at most every 0.2 s, and at 0.7 ms a step it jumped from
# epoch 1 past epoch 2's end between two writes, so the SIGTERM landed in epoch 3; at
# hidden 128 (0.46 s an epoch) a shell slowed by other tests could still miss epoch 2
R=$TMP/rescale
DISTDPD_HEARTBEAT=$TMP/rs_hb.json "$DD_CLI" train-pa --data "$D" "${JOB[@]}" --hidden 256 --epochs 4 --out "$R" -q &
tp=$!
t=0
until [ "$(json_num "$(cat "$TMP/rs_hb.json" 2>/dev/null || true)" step)" -ge 245 ] 2>/dev/null; do
    sleep 0.01
    t=$((t + 1))
    [ "$t" -lt 6000 ] || break
done
kill -TERM "$tp"
set +e
wait "$tp"
rc=$?
set -e
if [ "$rc" -eq 75 ]; then pass; else fail "rescale: the stopped run exited $rc, want 75"; fi
run train-pa --resume "$R" --rescale-batch 60 --rescale-warmup 10 -q
expect_rc 0 "rescale: resume with --rescale-batch 60"
steps=$(grep -o '"step":[0-9]*' "$R/metrics.jsonl" | cut -d: -f2 | tr '\n' ' ')
if [ "$steps" = "239 478 598 718 " ]; then pass; else fail "rescale: steps at the epochs' ends '$steps', want '239 478 598 718 '"; fi
lrs=$(grep -o '"lr":[0-9.e-]*' "$R/metrics.jsonl" | cut -d: -f2 | tr '\n' ' ')
if [ "$lrs" = "0.005 0.005 0.01 0.01 " ]; then pass; else fail "rescale: lr per epoch '$lrs', want '0.005 0.005 0.01 0.01 '"; fi
has "$(tr -d ' \n\t' <"$R/config.json")" '"batch":60' "rescale: config.json holds the new batch"
run train-pa --resume "$R" --epochs 5 -q
expect_rc 0 "rescale: the rescaled run resumes again (config.json and checkpoint agree)"

# linear-lr under the launcher: 1 slot, then 2 from step 100 on: the batch doubles with
# the world size, and the learning rate with it (from the epoch after the restart). 12
# epochs of 239 steps (0.8 ms each at 1 rank on a Zen 5 core): the restart has about 2 s
# to come before the last epoch, however late the launcher and this script see the
# heartbeat (5 epochs left it about 0.5 s)
R=$TMP/linear
printf '%s\n' '#!/bin/bash' \
    "s=\$(grep -o '\"step\":[0-9]*' '$R/launch/heartbeat.json' 2>/dev/null | cut -d: -f2)" \
    "if [ -f '$TMP/grown' ] || [ \"\${s:-0}\" -ge 100 ]; then touch '$TMP/grown'; echo localhost:2; else echo localhost:1; fi" \
    >"$TMP/disc2.sh"
run launch --discover "bash $TMP/disc2.sh" --discover-every 0.1 --rescale linear-lr --rescale-warmup 0 -- \
    train-pa --data "$D" "${JOB[@]}" --epochs 12 --hidden 32 --out "$R" -q
expect_rc 0 "linear-lr: completes"
has "$(cat "$R/launch.jsonl")" '"event":"rescale","world_size":2,"base_world_size":1,"base_batch":30,"batch":60' "linear-lr: rescale event"
last=$(tail -n 1 "$R/metrics.jsonl")
has "$last" '"lr":0.01' "linear-lr: the last epoch at twice the learning rate"
has "$last" '"world_size":2' "linear-lr: the last epoch on 2 ranks"

finish
