# Shared parts of the launcher tests (launch.sh, launch_faults_slow.sh). Sourced after
# common.bash.
#
#   D, JOB            a simulated data set and a small data-parallel job (~2 s at np 2)
#   hb_step RUN       rank 0's last heartbeat step (-1 without one)
#   wait_step RUN S   waits (at most 60 s) until the heartbeat reaches step S
#   job_ranks RUN     the pids of the ranks of the launcher's current start
#   untimed_launch F  metrics.jsonl without the keys that differ between runs or restarts
#   kill_trial K NP   launch at NP ranks, kill -9 a random rank at a random step, check
#                     that the run completes equal to $TMP/straight

D=$TMP/sim
run simulate --out "$D" --samples 12000 --pa wiener-hammerstein -q
expect_rc 0 "simulate"
# 239 steps an epoch; checkpoints every 20 steps
JOB=(--model gru --hidden 16 --frame 32 --stride 1 --batch 30 --lr 5e-3 --epochs 6 --ckpt-every 20)

hb_step() {
    local s
    s=$(json_num "$(cat "$1/launch/heartbeat.json" 2>/dev/null || true)" step)
    echo "${s:--1}"
}

wait_step() {
    local t=0
    while [ "$(hb_step "$1")" -lt "$2" ]; do
        sleep 0.05
        t=$((t + 1))
        if [ "$t" -gt 1200 ]; then
            fail "no heartbeat at step $2 within 60 s in $1"
            return 1
        fi
    done
}

# the pid of mpirun of the newest start in launch.jsonl, then its children (the ranks)
job_ranks() {
    local mp
    mp=$(grep '"event":"start"' "$1/launch.jsonl" | tail -n 1 | grep -o '"pid":[0-9]*' | cut -d: -f2)
    pgrep -P "$mp" || true
}

untimed_launch() { # also without the keys a restart changes
    untimed "$1" | sed 's/,"restart":[^,}]*//; s/,"world_size":[^,}]*//'
}

kill_trial() {
    local k=$1 np=$2 R=$TMP/kill$1 target ranks victim
    # of 1434 steps (about 2 s): at least 900 steps (about 1.3 s) remain for the kill to land
    # in, however late this shell sees the heartbeat (rewritten every 0.2 s)
    target=$((RANDOM % 500 + 30))
    timeout 300 "$DD_CLI" launch --np "$np" --backoff 0 -- train-pa --data "$D" "${JOB[@]}" --out "$R" -q \
        >"$TMP/.lout" 2>"$TMP/.lerr" &
    local lp=$!
    if wait_step "$R" "$target"; then
        mapfile -t ranks < <(job_ranks "$R")
        if [ "${#ranks[@]}" -gt 0 ]; then
            victim=${ranks[$((RANDOM % ${#ranks[@]}))]}
            kill -9 "$victim" 2>/dev/null || true
        else
            echo "trial $k: no rank of the job found at step $target (it has ended): no kill"
        fi
    fi
    set +e
    wait "$lp"
    local rc=$?
    set -e
    if [ "$rc" -eq 0 ]; then pass; else fail "trial $k (kill at step $target): launch exit status $rc: $(tail -c 1500 "$TMP/.lerr")"; fi
    local starts
    starts=$(grep -c '"event":"start"' "$R/launch.jsonl")
    if [ "$starts" -ge 2 ]; then pass; else fail "trial $k: $starts start(s), want a restart after the kill"; fi
    has "$(cat "$R/launch.jsonl")" '"cause":"failed"' "trial $k: the kill is recorded as a failure"
    has "$(cat "$R/launch.jsonl")" '"time_lost_s":' "trial $k: time lost recorded"
    echo "trial $k: kill -9 at step $target: time lost $(json_num "$(grep time_lost_s "$R/launch.jsonl" | head -n 1)" time_lost_s) s, steps redone $(json_num "$(grep '"event":"checkpoint"' "$R/launch.jsonl" | head -n 1)" steps_redone)"
    if [ "$(untimed_launch "$TMP/straight/metrics.jsonl")" = "$(untimed_launch "$R/metrics.jsonl")" ]; then pass; else
        fail "trial $k (kill at step $target): metrics.jsonl differs from the straight run's: $(diff <(untimed_launch "$TMP/straight/metrics.jsonl") <(untimed_launch "$R/metrics.jsonl") | head -c 1200)"
    fi
}
