#!/bin/bash
# Fault injection under distdpd launch (label slow):
#   - kill -9 of a random rank at a random step, 20 trials: every job completes and ends
#     exactly as the uninterrupted run (same world size, global batch kept);
#   - kill -9 during a checkpoint write at a random byte offset, 20 trials: the torn
#     temporary file is never chosen, the newest valid checkpoint is, and the job completes
#     exactly as the uninterrupted run;
#   - a hung rank (SIGSTOP): the heartbeat timeout notices it, the group is killed and
#     restarted, the job completes;
#   - SIGTERM to the launcher: the job checkpoints within --preempt-grace, the launcher
#     exits 75, and the same command then completes exactly as the uninterrupted run;
#   - elastic: a discovery script that offers 2 slots, then 1, then 3: the job follows it
#     (world sizes 2, 1, 3 in launch.jsonl, two resizes) and completes within 0.1 dB of
#     the uninterrupted run.
set -euo pipefail
source "$(dirname "$0")/common.bash"
source "$(dirname "$0")/launch_common.bash"
mpi_setup

mrun 2 train-pa --data "$D" "${JOB[@]}" --out "$TMP/straight" -q
expect_rc 0 "straight run"

# ---- 20 kills of a random rank
for trial in $(seq 1 20); do
    kill_trial "$trial" 2
done

# ---- 20 kills inside a checkpoint write: the writer raises SIGKILL after BYTES bytes of
# the temporary file of its N-th checkpoint (DISTDPD_CKPT_KILL_AT=BYTES@N, test-only; N
# from 2, so that a valid checkpoint exists), then the launcher continues
size=$(stat -c %s "$TMP/straight/last.ckpt")
for trial in $(seq 1 20); do
    R=$TMP/torn$trial
    at=$(((RANDOM * 32768 + RANDOM) % 16384)) # below the size of every checkpoint of the job
    nth=$((RANDOM % 40 + 2))
    set +e
    DISTDPD_CKPT_KILL_AT=$at@$nth timeout 120 mpirun -np 2 "$DD_CLI" train-pa --data "$D" "${JOB[@]}" --keep-last 3 \
        --out "$R" -q >/dev/null 2>"$TMP/.terr"
    rc=$?
    set -e
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; then pass; else fail "torn $trial: the job was not killed in its write (exit $rc)"; fi
    if [ -n "$(find "$R" -name '*.tmp.*')" ]; then pass; else fail "torn $trial: no temporary file left by the kill at byte $at of checkpoint $nth"; fi
    run launch --np 2 --backoff 0 -- train-pa --data "$D" "${JOB[@]}" --keep-last 3 --out "$R" -q
    expect_rc 0 "torn $trial (kill at byte $at of $size of checkpoint $nth): launch completes"
    hasnot "$(cat "$R/launch.jsonl")" '.tmp.' "torn $trial: a temporary file was chosen"
    if [ "$(untimed_launch "$TMP/straight/metrics.jsonl")" = "$(untimed_launch "$R/metrics.jsonl")" ]; then pass; else
        fail "torn $trial: metrics.jsonl differs from the straight run's"
    fi
done

# ---- a hung rank (SIGSTOP): detected by the heartbeat timeout
R=$TMP/hung
timeout 300 "$DD_CLI" launch --np 2 --backoff 0 --hang-timeout 3 -- train-pa --data "$D" "${JOB[@]}" --out "$R" -q \
    >/dev/null 2>"$TMP/.herr" &
lp=$!
if wait_step "$R" 200; then
    mapfile -t ranks < <(job_ranks "$R")
    kill -STOP "${ranks[1]}"
fi
set +e
wait "$lp"
rc=$?
set -e
if [ "$rc" -eq 0 ]; then pass; else fail "hung rank: launch exit status $rc: $(tail -c 1000 "$TMP/.herr")"; fi
has "$(cat "$R/launch.jsonl")" '"cause":"hang"' "hung rank: recorded as a hang"
has "$(cat "$TMP/.herr")" "no heartbeat from rank 0 for" "hung rank: message"
if [ "$(untimed_launch "$TMP/straight/metrics.jsonl")" = "$(untimed_launch "$R/metrics.jsonl")" ]; then pass; else
    fail "hung rank: metrics.jsonl differs from the straight run's"
fi

# ---- SIGTERM to the launcher: checkpoint, exit 75; the same command completes
R=$TMP/preempt
LCMD=(launch --np 2 --backoff 0 --preempt-grace 20 -- train-pa --data "$D" "${JOB[@]}" --out "$R" -q)
timeout 300 "$DD_CLI" "${LCMD[@]}" >/dev/null 2>"$TMP/.perr" &
lp=$!
wait_step "$R" 500 || true
t0=$(date +%s.%N)
kill -TERM "$lp"
set +e
wait "$lp"
rc=$?
set -e
t1=$(date +%s.%N)
if [ "$rc" -eq 75 ]; then pass; else fail "SIGTERM: launch exit status $rc, want 75: $(tail -c 1000 "$TMP/.perr")"; fi
near "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" 0 20 "SIGTERM: stopped within the grace time"
has "$(cat "$R/launch.jsonl")" '"cause":"signalled","rc":75' "SIGTERM: the job wrote its checkpoint and exited 75"
run "${LCMD[@]}"
expect_rc 0 "SIGTERM: the same command completes the run"
if [ "$(untimed_launch "$TMP/straight/metrics.jsonl")" = "$(untimed_launch "$R/metrics.jsonl")" ]; then pass; else
    fail "SIGTERM: metrics.jsonl differs from the straight run's"
fi

# ---- elastic: 2 slots, then 1 (from step 2000), then 3 (from step 4500) of a job of 7170
# steps (30 epochs: seconds between the phases for the discovery every 0.2 s); a phase
# only moves forward, so a restart (whose heartbeat starts afresh) does not turn it back
R=$TMP/elastic
EJOB=("${JOB[@]}" --epochs 30)
mrun 2 train-pa --data "$D" "${EJOB[@]}" --out "$TMP/estraight" -q
expect_rc 0 "elastic: straight run"
cat >"$TMP/discover.sh" <<EOF
#!/bin/bash
phase=\$(cat "$TMP/phase" 2>/dev/null || echo 0)
step=\$(grep -o '"step":[0-9]*' "$R/launch/heartbeat.json" 2>/dev/null | cut -d: -f2)
step=\${step:-0}
if [ "\$phase" = 0 ] && [ "\$step" -ge 2000 ]; then phase=1; fi
if [ "\$phase" = 1 ] && [ "\$step" -ge 4500 ]; then phase=2; fi
echo "\$phase" >"$TMP/phase"
case \$phase in 0) echo localhost:2 ;; 1) echo localhost:1 ;; 2) echo localhost:3 ;; esac
EOF
run launch --discover "bash $TMP/discover.sh" --discover-every 0.2 --max-restarts 4 -- train-pa --data "$D" "${EJOB[@]}" --out "$R" -q
expect_rc 0 "elastic: completes"
sizes=$(grep '"event":"start"' "$R/launch.jsonl" | grep -o '"world_size":[0-9]*' | cut -d: -f2 | tr '\n' ' ')
if [ "$sizes" = "2 1 3 " ]; then pass; else fail "elastic: world sizes '$sizes', want '2 1 3 '"; fi
if [ "$(grep -c '"cause":"resize"' "$R/launch.jsonl")" = 2 ]; then pass; else fail "elastic: $(grep -c '"cause":"resize"' "$R/launch.jsonl") resizes, want 2"; fi
ws=$(grep -o '"world_size":[0-9]*' "$R/metrics.jsonl" | cut -d: -f2 | sort -u | tr '\n' ' ')
has "$ws" "1" "elastic: metrics.jsonl records world size 1"
has "$ws" "3" "elastic: metrics.jsonl records world size 3"
a=$(ev "$TMP/estraight")
b=$(ev "$R")
near "$(json_num "$a" test_nmse_db)" "$(json_num "$b" test_nmse_db)" 0.1 "elastic: test NMSE within 0.1 dB of the uninterrupted run"

finish
