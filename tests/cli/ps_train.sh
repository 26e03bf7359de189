#!/bin/bash
# Training on the parameter server (docs/ps.md, "Training"), through distdpd ps-local:
#  1. --staleness 0 with one worker equals the plain single-process trainer: one step
#     per epoch (--batch above the frames), so each epoch's train_loss is one step's
#     loss: rel. 1e-6 per step; and a run of many steps per epoch: every epoch's loss,
#     validation NMSE and grad_norm_max (the workers' reported norms) rel. 1e-6;
#     best.ckpt readable by eval and run.
#  2. --staleness 2 with 3 workers: no lease more than 2 clocks stale (the histogram),
#     every frame of every epoch trained exactly once.
#  3. 3 workers, one killed -9 mid-run, a fourth (a spare key) joining: the run
#     completes, every frame of every epoch trained exactly once (counted by the
#     coordinator), the killed worker is declared dead, the new one trained batches.
#  3b. a worker that dies between its commit and its apply (test-only
#     DD_PS_KILL_AFTER_COMMIT): the coordinator applies its staged update; the servers'
#     applied items are the blocks times the updates (no partial or doubled push).
#  4. refusals: options, a cluster file without a coordinator, an optimiser mismatch.
#  1c. --resume: a run of 2 epochs resumed to 4 (ps-local ... -- train-pa --resume RUN
#     --epochs 4, a fresh cluster restored from last.ckpt) equals an uninterrupted 4-epoch
#     --ps run: loss, val/test NMSE, grad_norm_max per epoch rel. 1e-6; refusals: a plain
#     run's checkpoint (no block versions), a directory that is not a run.
#  1b. train-dpd --ps through the frozen PA model of case 1: one worker equals the plain
#     train-dpd (loss, NMSE, grad_norm_max rel. 1e-6); eval reads the run.
#  1d. train-dpd --ps resumed through ps-local (1 epoch + 1) equals the 2-epoch run of 1b.
#  1e. the by-hand resume (keys, allow and cluster files written by the test, separate
#     ps-server, coordinator and worker processes) equals the 4-epoch run of 1c.
# Every process is bounded in time (ps-local --timeout, timeout(1)).
set -euo pipefail
source "$(dirname "$0")/common.bash"

D="$TMP/data"
run simulate --out "$D" --samples 12000 --pa wiener-hammerstein -q
expect_rc 0 "simulate"
COMMON=(--data "$D" --model gru --hidden 6 --frame 32 --stride 8 --no-report -q --lr-schedule constant)

py_epochs() { # RUN KEY: one value per epoch of metrics.jsonl
    python3 -c "import json,sys
for l in open(sys.argv[1] + '/metrics.jsonl'): print(json.loads(l)[sys.argv[2]])" "$1" "$2"
}
same_rel() { # FILE_A FILE_B TOL DESC: line by line relative difference
    if python3 - "$1" "$2" "$3" <<'PY'; then pass; else fail "$4"; fi
import sys
a = [float(x) for x in open(sys.argv[1])]
b = [float(x) for x in open(sys.argv[2])]
tol = float(sys.argv[3])
ok = len(a) == len(b) and len(a) > 0
for x, y in zip(a, b):
    if abs(x - y) > tol * max(abs(x), abs(y)):
        ok = False
        print("differ: %r %r" % (x, y))
sys.exit(0 if ok else 1)
PY
}

# ---- 1. N = 1 equals the single-process trainer
for case in onestep manysteps; do
    if [ $case = onestep ]; then ARGS=(--batch 4096 --epochs 5); else ARGS=(--batch 16 --epochs 2); fi
    run train-pa "${COMMON[@]}" "${ARGS[@]}" --out "$TMP/ref_$case"
    expect_rc 0 "plain train-pa ($case)"
    set +e
    timeout 120 "$DD_CLI" ps-local --servers 2 --workers 1 --timeout 100 -- train-pa "${COMMON[@]}" "${ARGS[@]}" \
        --staleness 0 --out "$TMP/ps_$case" >"$TMP/.out" 2>"$TMP/.err"
    RC=$?
    set -e
    ERR=$(cat "$TMP/.err")
    expect_rc 0 "ps-local 2 servers 1 worker ($case)"
    for k in train_loss val_nmse_db test_nmse_db grad_norm_max; do
        py_epochs "$TMP/ref_$case" $k >"$TMP/a"
        py_epochs "$TMP/ps_$case" $k >"$TMP/b"
        same_rel "$TMP/a" "$TMP/b" 1e-6 "$case: $k per epoch of the ps run equals the plain trainer's (rel 1e-6)"
    done
done
if [ "$(wc -l <"$TMP/ps_onestep/metrics.jsonl")" -eq 5 ]; then pass; else fail "5 epochs of one step each"; fi
run eval --run "$TMP/ps_manysteps" --json
expect_rc 0 "eval of the ps run's best.ckpt"
has "$OUT" "val_nmse_db" "eval prints the metrics"
run run --run "$TMP/ps_manysteps" --in "$D/test_input.csv" --out "$TMP/pred.csv"
expect_rc 0 "run of the ps run's best model"
has "$(cat "$TMP/ps_manysteps/ps.json")" '"pushes":	114' "ps.json counts the pushes"
has "$(cat "$TMP/ps_manysteps/ps.json")" '"blocks":' "ps.json has the block placement"

# ---- 1c. --resume of a --ps run equals the uninterrupted --ps run
ps_local() { # RUN_DESC ARGS...: ps-local with 2 servers and 1 worker, bounded in time
    local desc=$1
    shift
    set +e
    timeout 120 "$DD_CLI" ps-local --servers 2 --workers 1 --timeout 100 -- "$@" >"$TMP/.out" 2>"$TMP/.err"
    RC=$?
    set -e
    ERR=$(cat "$TMP/.err")
    expect_rc 0 "$desc"
}
RARGS=("${COMMON[@]}" --batch 16 --staleness 0)
ps_local "ps-local 4 epochs" train-pa "${RARGS[@]}" --epochs 4 --out "$TMP/ps_full4"
ps_local "ps-local 2 epochs" train-pa "${RARGS[@]}" --epochs 2 --out "$TMP/ps_half"
ps_local "ps-local --resume to 4 epochs" train-pa --resume "$TMP/ps_half" --epochs 4 --staleness 0 -q
if [ "$(wc -l <"$TMP/ps_half/metrics.jsonl")" -eq 4 ]; then pass; else fail "the resumed run has 4 epochs in metrics.jsonl"; fi
for k in train_loss val_nmse_db test_nmse_db grad_norm_max; do
    py_epochs "$TMP/ps_full4" $k >"$TMP/a"
    py_epochs "$TMP/ps_half" $k >"$TMP/b"
    same_rel "$TMP/a" "$TMP/b" 1e-6 "resume: $k per epoch of 2 + 2 epochs equals the 4-epoch ps run's (rel 1e-6)"
done
if [ -f "$TMP/ps_half/ps.1/cluster.json" ] && [ -f "$TMP/ps_half/ps/cluster.json" ]; then pass; else
    fail "resume: the first cluster's files kept in RUN/ps.1, the new ones in RUN/ps"; fi
has "$(cat "$TMP/ps_half/ps.json")" '"pushes":	114' "ps.json of the resumed part counts its 2 epochs' pushes"
run ps-local --servers 1 --workers 1 --timeout 60 -- train-pa --resume "$TMP/ref_manysteps" --epochs 3 --ps-timeout 5
expect_rc 1 "--resume of a plain run's checkpoint under --ps"
has "$ERR" "ref_manysteps/last.ckpt: no ps.versions section: not the checkpoint of a --ps run" "no block versions named"
run ps-local --servers 1 --workers 1 --timeout 60 -- train-pa --resume "$TMP/nowhere" --epochs 3
expect_rc 2 "--resume of a directory that is not a run"
has "$ERR" "nowhere/config.json is missing" "the missing config.json named"

# ---- 1b. train-dpd --ps (direct learning through the frozen PA model of ref_manysteps):
# one worker at --staleness 0 equals the plain train-dpd, and eval reads the run
DARGS=("${COMMON[@]}" --batch 16 --epochs 2 --pa-run "$TMP/ref_manysteps")
run train-dpd "${DARGS[@]}" --out "$TMP/dpd_ref"
expect_rc 0 "plain train-dpd"
set +e
timeout 120 "$DD_CLI" ps-local --servers 2 --workers 1 --timeout 100 -- train-dpd "${DARGS[@]}" --staleness 0 \
    --out "$TMP/dpd_ps" >"$TMP/.out" 2>"$TMP/.err"
RC=$?
set -e
ERR=$(cat "$TMP/.err")
expect_rc 0 "ps-local train-dpd, 2 servers 1 worker"
for k in train_loss val_nmse_db test_nmse_db grad_norm_max; do
    py_epochs "$TMP/dpd_ref" $k >"$TMP/a"
    py_epochs "$TMP/dpd_ps" $k >"$TMP/b"
    same_rel "$TMP/a" "$TMP/b" 1e-6 "train-dpd: $k per epoch of the ps run equals the plain trainer's (rel 1e-6)"
done
run eval --run "$TMP/dpd_ps" --json
expect_rc 0 "eval of the ps train-dpd run"
has "$OUT" '"task":"dla"' "eval reads the DPD run (task dla)"
has "$OUT" "val_aclr_avg_db" "eval of a DPD run prints its ACLR"

# ---- 1d. train-dpd --ps resumed: 1 epoch resumed to 2 equals the 2-epoch run of 1b
ps_local "ps-local train-dpd 1 epoch" train-dpd "${COMMON[@]}" --batch 16 --epochs 1 --pa-run "$TMP/ref_manysteps" \
    --staleness 0 --out "$TMP/dpd_half"
ps_local "ps-local train-dpd --resume to 2 epochs" train-dpd --resume "$TMP/dpd_half" --epochs 2 --staleness 0 -q
for k in train_loss val_nmse_db test_nmse_db grad_norm_max; do
    py_epochs "$TMP/dpd_ps" $k >"$TMP/a"
    py_epochs "$TMP/dpd_half" $k >"$TMP/b"
    same_rel "$TMP/a" "$TMP/b" 1e-6 "train-dpd resume: $k per epoch of 1 + 1 epochs equals the 2-epoch ps run's (rel 1e-6)"
done

# ---- 1e. the by-hand resume of docs/ps.md: fresh keys, allow and cluster files written
# here, two `distdpd ps-server`, the coordinator with --resume and one worker, each its own
# process; 2 epochs (ps-local) + 2 by hand equal the 4-epoch ps run of 1c
ps_local "ps-local 2 epochs (to resume by hand)" train-pa "${RARGS[@]}" --epochs 2 --out "$TMP/ps_hand"
H="$TMP/hand"
mkdir -p "$H"
for k in s0 s1 co w0; do
    run keygen --out "$H/$k"
    expect_rc 0 "keygen $k"
done
pubkey() { grep -v '^#' "$H/$1.pub"; }
printf '%s w0\n%s coordinator\n' "$(pubkey w0)" "$(pubkey co)" >"$H/allow.txt"
P0=$(free_port)
P1=$(free_port)
PC=$(free_port)
cat >"$H/cluster.json" <<EOF
{"replicas": 1, "optimizer": {"kind": "adamw"},
 "coordinator": {"address": "tcp://127.0.0.1:$PC", "public_key": "$(pubkey co)"},
 "servers": [{"name": "s0", "address": "tcp://127.0.0.1:$P0", "public_key": "$(pubkey s0)"},
             {"name": "s1", "address": "tcp://127.0.0.1:$P1", "public_key": "$(pubkey s1)"}]}
EOF
timeout 100 "$DD_CLI" ps-server --bind "tcp://127.0.0.1:$P0" --key "$H/s0.key" --allow "$H/allow.txt" \
    --cluster "$H/cluster.json" >"$H/s0.log" 2>&1 &
S0=$!
timeout 100 "$DD_CLI" ps-server --bind "tcp://127.0.0.1:$P1" --key "$H/s1.key" --allow "$H/allow.txt" \
    --cluster "$H/cluster.json" >"$H/s1.log" 2>&1 &
S1=$!
timeout 100 "$DD_CLI" train-pa --out "$TMP/ps_hand" --data "$D" --ps "$H/cluster.json" --key "$H/w0.key" \
    >"$H/w0.log" 2>&1 &
W0=$!
set +e
timeout 100 "$DD_CLI" train-pa --resume "$TMP/ps_hand" --epochs 4 --ps "$H/cluster.json" --key "$H/co.key" \
    --ps-role coordinator --allow "$H/allow.txt" --staleness 0 -q >"$TMP/.out" 2>"$TMP/.err"
RC=$?
wait $W0
WRC=$?
kill $S0 $S1 2>/dev/null
wait $S0 $S1 2>/dev/null
set -e
ERR=$(cat "$TMP/.err")
expect_rc 0 "by-hand coordinator --resume to 4 epochs"
if [ $WRC -eq 0 ]; then pass; else fail "the by-hand worker ended with $WRC: $(tail -3 "$H/w0.log")"; fi
for k in train_loss val_nmse_db test_nmse_db grad_norm_max; do
    py_epochs "$TMP/ps_full4" $k >"$TMP/a"
    py_epochs "$TMP/ps_hand" $k >"$TMP/b"
    same_rel "$TMP/a" "$TMP/b" 1e-6 "by-hand resume: $k per epoch of 2 + 2 epochs equals the 4-epoch ps run's (rel 1e-6)"
done

# ---- 2. bounded staleness with 3 workers
set +e
timeout 120 "$DD_CLI" ps-local --servers 2 --workers 3 --timeout 100 -- train-pa "${COMMON[@]}" --stride 1 --batch 16 \
    --epochs 3 --staleness 2 --out "$TMP/ssp" >"$TMP/.out" 2>"$TMP/.err"
RC=$?
set -e
ERR=$(cat "$TMP/.err")
expect_rc 0 "ps-local 3 workers --staleness 2"
if python3 - "$TMP/ssp" <<'PY'; then pass; else fail "--staleness 2: histogram or frame counts wrong"; fi
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1] + '/metrics.jsonl')]
cfg = json.load(open(sys.argv[1] + '/ps.json'))
ok = len(recs) == 3
for r in recs:
    h = r['ps_staleness_hist']
    frames = [e for e in cfg['epochs'] if e['epoch'] == r['epoch']][0]['frames']
    print('epoch', r['epoch'], 'staleness', h, 'lag', r['ps_update_lag_hist'], 'frames', frames, r['ps_frames_once'])
    ok &= len(h) <= 3 and sum(h) >= 1                       # never more than 2 clocks stale
    ok &= r['ps_frames_once'] == frames and r['ps_frames_repeated'] == 0 and r['ps_frames_missed'] == 0
    ok &= r['ps_workers'] == 3 and r['ps_staleness'] == 2
    ok &= r['grad_norm_max'] > 0                            # the workers report their norms
sys.exit(0 if ok else 1)
PY

# ---- 3. a worker killed -9 mid-run, a fourth joining
set +e
# about 0.4 s per epoch: 10 epochs leave the joining worker seconds to start and join on a
# slow machine; a lease of 3 s, so that only the killed worker's lease expires, not that
# of a live worker that the machine's other work stalled for a second
KARGS=("${COMMON[@]}" --hidden 16 --frame 64 --stride 1 --batch 8 --epochs 10 -v)
timeout 150 "$DD_CLI" ps-local --servers 2 --workers 3 --spare-keys 1 --timeout 140 -- train-pa "${KARGS[@]}" \
    --staleness inf --lease-ms 3000 --out "$TMP/kill" >"$TMP/kill.out" 2>"$TMP/kill.err" &
PSL=$!
set -e
for _ in $(seq 1 500); do # until the first epoch ended
    [ -s "$TMP/kill/metrics.jsonl" ] && break
    sleep 0.02
done
sleep 0.15 # into the second epoch
W1=$(cat "$TMP/kill/ps/w1.pid")
kill -9 "$W1" 2>/dev/null || true
timeout 120 "$DD_CLI" train-pa "${KARGS[@]}" --out "$TMP/kill" \
    --ps "$TMP/kill/ps/cluster.json" --key "$TMP/kill/ps/spare0.key" -q >"$TMP/spare.out" 2>"$TMP/spare.err" &
SPARE=$!
set +e
wait $PSL
RC=$?
wait $SPARE
SRC=$?
set -e
ERR=$(cat "$TMP/kill.err")
expect_rc 0 "ps-local run with a worker killed -9"
if [ "$SRC" -eq 0 ]; then pass; else fail "the joining worker exited $SRC: $(cat "$TMP/spare.err")"; fi
if python3 - "$TMP/kill" <<'PY'; then pass; else fail "kill -9: frames lost or doubled, or membership wrong"; fi
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1] + '/metrics.jsonl')]
ps = json.load(open(sys.argv[1] + '/ps.json'))
ok = len(recs) == 10
for r in recs:
    frames = [e for e in ps['epochs'] if e['epoch'] == r['epoch']][0]['frames']
    print('epoch', r['epoch'], 'once', r['ps_frames_once'], 'of', frames, 'repeated', r['ps_frames_repeated'],
          'missed', r['ps_frames_missed'], 'expired', r['ps_leases_expired'], 'redone', r['ps_batches_redone'],
          'workers', r['ps_workers'])
    ok &= r['ps_frames_once'] == frames and r['ps_frames_repeated'] == 0 and r['ps_frames_missed'] == 0
ws = {w['name'].split(':')[0]: w for w in ps['workers']}
print({k: (w['state'], w['batches']) for k, w in ws.items()})
ok &= ws['w1.key']['state'] == 'dead'
ok &= ws['spare0.key']['batches'] > 0
# the killed worker usually held a batch: either its lease expired before its commit and
# another worker redid the batch, or it had committed (its update staged on the servers)
# and the coordinator applied the staged update on its behalf (docs/ps.md, "Atomic
# pushes"); killed between a done and its next lease it held none (silent: it leaves)
redone = sum(r['ps_batches_redone'] for r in recs)
completed = sum(r['ps_pushes_completed'] for r in recs)
lost = sum(r['ps_pushes_lost'] for r in recs)
print('redone', redone, 'completed by the coordinator', completed, 'lost', lost)
ok &= redone + completed <= 1 and lost == 0
ok &= sum(w['batches'] for w in ps['workers']) == ps['pushes']
# every committed update applied to every block exactly once: the servers' applied push
# items (their logs) are the blocks times the updates (a partial push would break it)
import glob, re
applied = 0
for f in glob.glob(sys.argv[1] + '/ps/s*.log'):
    m = re.search(r'(\d+) pushes applied', open(f).read())
    ok &= m is not None
    applied += int(m.group(1)) if m else 0
print('push items applied', applied, 'blocks', len(ps['blocks']), 'updates', ps['pushes'] + completed)
ok &= applied == len(ps['blocks']) * (ps['pushes'] + completed)
sys.exit(0 if ok else 1)
PY
if grep -qE "w1.key[^ ]* (lease of batch [0-9]+ expired|went silent after committing batch [0-9]+: its staged update was applied|silent for 3000 ms)" <<<"$ERR"; then pass; else
    fail "the coordinator did not log the killed worker's batch"; fi

# ---- 3b. a worker dying between its commit and its apply (DD_PS_KILL_AFTER_COMMIT, test
# only): the coordinator applies the worker's staged update on its behalf, so the batch
# counts once and its update reaches every block exactly once (docs/ps.md "Atomic pushes")
set +e
DD_PS_KILL_AFTER_COMMIT=w1:5 timeout 120 "$DD_CLI" ps-local --servers 2 --workers 2 --timeout 100 -- train-pa \
    "${COMMON[@]}" --batch 16 --epochs 2 --staleness 4 --lease-ms 3000 -v --out "$TMP/ckill" \
    >"$TMP/.out" 2>"$TMP/.err"
RC=$?
set -e
ERR=$(cat "$TMP/.err")
expect_rc 0 "ps-local with a worker dying after its 5th commit"
has "$ERR" "went silent after committing batch" "the coordinator notices the silent committed worker"
has "$ERR" "its staged update was applied on its behalf" "the coordinator completes the staged update"
if python3 - "$TMP/ckill" <<'PY'; then pass; else fail "commit-then-die: update lost, doubled or partial"; fi
import glob, json, re, sys
recs = [json.loads(l) for l in open(sys.argv[1] + '/metrics.jsonl')]
ps = json.load(open(sys.argv[1] + '/ps.json'))
ok = len(recs) == 2
for r in recs:
    frames = [e for e in ps['epochs'] if e['epoch'] == r['epoch']][0]['frames']
    ok &= r['ps_frames_once'] == frames and r['ps_frames_repeated'] == 0 and r['ps_frames_missed'] == 0
completed = sum(r['ps_pushes_completed'] for r in recs)
lost = sum(r['ps_pushes_lost'] for r in recs)
redone = sum(r['ps_batches_redone'] for r in recs)
applied = sum(int(re.search(r'(\d+) pushes applied', open(f).read()).group(1)) for f in glob.glob(sys.argv[1] + '/ps/s*.log'))
print('completed', completed, 'lost', lost, 'redone', redone, 'applied', applied, 'blocks', len(ps['blocks']),
      'pushes', ps['pushes'])
ok &= completed == 1 and lost == 0 and redone == 0
ok &= applied == len(ps['blocks']) * (ps['pushes'] + completed)
# ps-local's coordinator waits for both workers (--ps-min-workers 2): both got batches
ok &= len(ps['workers']) == 2 and all(w['batches'] > 0 for w in ps['workers'])
sys.exit(0 if ok else 1)
PY

# ---- 4. refusals
run train-pa "${COMMON[@]}" --out "$TMP/x1" --ps "$TMP/kill/ps/cluster.json"
expect_rc 2 "--ps without --key"
has "$ERR" "--ps needs --key KEY" "--key required"
run train-pa "${COMMON[@]}" --out "$TMP/x1" --ps "$TMP/kill/ps/cluster.json" --key "$TMP/kill/ps/w0.key" --staleness -1
expect_rc 2 "--staleness -1"
has "$ERR" "--staleness: expected an integer in [0, 1000000] or inf, got '-1'" "--staleness range"
run train-pa "${COMMON[@]}" --out "$TMP/x1" --ps "$TMP/kill/ps/cluster.json" --key "$TMP/kill/ps/w0.key" --allow /dev/null
expect_rc 2 "--allow on a worker"
has "$ERR" "--allow applies to --ps-role coordinator only" "--allow refusal"
run train-pa "${COMMON[@]}" --out "$TMP/x1" --ps "$TMP/kill/ps/cluster.json" --key "$TMP/kill/ps/w0.key" --ps-min-workers 2
expect_rc 2 "--ps-min-workers on a worker"
has "$ERR" "--ps-min-workers applies to --ps-role coordinator only" "--ps-min-workers refusal"
# the coordinator waits for --ps-min-workers workers, at most --ps-timeout
run ps-local --servers 1 --workers 1 --timeout 60 -- train-pa "${COMMON[@]}" --out "$TMP/x3" --epochs 1 \
    --ps-min-workers 2 --ps-timeout 2
expect_rc 1 "ps-local: 1 worker, --ps-min-workers 2"
has "$ERR" "1 joined, --ps-min-workers 2" "the coordinator names the workers it waited for"
if [ -e "$TMP/x3/ps/w0.log" ] && ! grep -q "ps-min-workers" "$TMP/x3/ps/w0.log"; then pass; else
    fail "the worker got --ps-min-workers or did not run: $(cat "$TMP/x3/ps/w0.log" 2>/dev/null)"; fi
run train-pa "${COMMON[@]}" --out "$TMP/x1" --ps "$TMP/kill/ps/cluster.json" --key "$TMP/kill/ps/w0.key" --ps-role boss
expect_rc 2 "--ps-role boss"
has "$ERR" "--ps-role: expected worker or coordinator, got 'boss'" "--ps-role refusal"
run train-pa "${COMMON[@]}" --out "$TMP/x1" --staleness 2
expect_rc 2 "--staleness without --ps"
has "$ERR" "--staleness does not apply to data-parallel" "--staleness needs --ps"
grep -v coordinator "$TMP/kill/ps/cluster.json" >"$TMP/nocoord.json"
run train-pa "${COMMON[@]}" --out "$TMP/x1" --ps "$TMP/nocoord.json" --key "$TMP/kill/ps/w0.key"
expect_rc 1 "worker with a cluster file without coordinator"
has "$ERR" "no \"coordinator\" entry" "missing coordinator named"
run ps-local --servers 1 --workers 1 --timeout 60 --optimizer-json '{"kind": "adamw"}' -- train-pa "${COMMON[@]}" \
    --out "$TMP/x2" --opt sgd --ps-timeout 5 --epochs 1
expect_rc 1 "optimiser mismatch"
has "$ERR" "optimizer.kind is adamw but the run trains with --opt sgd" "optimiser mismatch named"
run ps-local --servers 1 --workers 1 -- train-pa "${COMMON[@]}"
expect_rc 2 "ps-local without --out"
has "$ERR" "ARGS need --out RUN" "ps-local --out"
finish
