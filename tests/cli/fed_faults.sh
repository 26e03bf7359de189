#!/bin/bash
# Federated averaging under faults and its options (docs/federated.md, "Tests"):
#  1. a bench that leaves at round 2 (--fail-at-round): with --min-completion 0.6 the
#     round aggregates the 2 answers; with --min-completion 1 it is not aggregated (the
#     global model unchanged: the surviving benches' NMSE of rounds 1 and 2 identical),
#     and round 3 goes on with the 2 that are left.
#  2. a straggler whose updates come after the round's timeout: counted as late and
#     discarded (the rounds aggregate the other two), the run completes.
#  2b. a bench silent past --dead-ms is declared gone and taken back when heard again.
#  2c. a bench busy longer than its --client-timeout (a slow round) is not timed out.
#  3. a bench whose key is not enrolled gets no welcome (exit 1 naming the allow file),
#     the coordinator logs the refused CURVE client, and an enrolled bench then runs the
#     federation to its end.
#  4. algorithms and options: scaffold sends twice the vector, fedprox, FedAvgM, FedAdam
#     and DP learn or run; DP reports an epsilon that grows with the rounds.
#  6. SIGTERM to fed-sim after round 1: the coordinator stops after the round in progress
#     (exit 0, fewer rounds than asked, last.ckpt readable) and every bench ends.
#  5. refusals: --secure with a robust aggregation, --secure-range alone, --trim without trimmed, Krum with too few benches, a missing
#     bench directory, a bench without --server.
set -euo pipefail
source "$(dirname "$0")/common.bash"

source "$(dirname "$0")/fed_common.bash"
M=(--hidden 8 --frame 50 --batch 16 --local-steps 10 --start-clients 3 --timeout 100)
bench_nmse() { # RUN ROUND BENCH
    python3 -c "import json,sys
l = [json.loads(x) for x in open(sys.argv[1] + '/metrics.jsonl')][int(sys.argv[2]) - 1]
print(l['bench_nmse_db'][sys.argv[3]])" "$1" "$2" "$3"
}

# 1. dropout above and below --min-completion (--dead-ms 4000: the benches ping every 1 s,
# and a live one that the machine's other work stalls for 2 s must not count as gone)
run fed-sim --clients 3 --data "$D" --out "$TMP/d1" --rounds 3 --fail-at-round 0=2 --min-clients 2 --min-completion 0.6 --dead-ms 4000 "${M[@]}"
expect_rc 0 "dropout above --min-completion"
[ "$(col "$TMP/d1" aggregated | tr '\n' ' ')" = "true true true " ] && pass || fail "aggregated: $(col "$TMP/d1" aggregated | tr '\n' ' ')"
[ "$(col "$TMP/d1" clients | tr '\n' ' ')" = "3 2 2 " ] && pass || fail "clients: $(col "$TMP/d1" clients | tr '\n' ' ')"
[ "$(col "$TMP/d1" sampled | tr '\n' ' ')" = "3 3 2 " ] && pass || fail "sampled: $(col "$TMP/d1" sampled | tr '\n' ' ')"
has "$ERR" "bench bench-00 silent for 4000 ms" "the dropout is noticed"
run fed-sim --clients 3 --data "$D" --out "$TMP/d2" --rounds 3 --fail-at-round 0=2 --min-clients 2 --min-completion 1 --dead-ms 4000 "${M[@]}"
expect_rc 0 "dropout below --min-completion"
[ "$(col "$TMP/d2" aggregated | tr '\n' ' ')" = "true false true " ] && pass || fail "aggregated: $(col "$TMP/d2" aggregated | tr '\n' ' ')"
[ "$(col "$TMP/d2" answered | tr '\n' ' ')" = "3 2 2 " ] && pass || fail "answered: $(col "$TMP/d2" answered | tr '\n' ' ')"
has "$ERR" "round 2 is not aggregated: 2 of 3 sampled benches answered, --min-completion 1 needs 3" "the skipped round is explained"
a=$(bench_nmse "$TMP/d2" 1 bench-01)
b=$(bench_nmse "$TMP/d2" 2 bench-01)
[ "$a" = "$b" ] && pass || fail "the model changed in a round that was not aggregated: $a vs $b"

# 2. a straggler: its updates are late
run fed-sim --clients 3 --data "$D" --out "$TMP/s" --rounds 2 --straggle-ms 2=6000 --round-timeout 2.5 --min-completion 0.6 "${M[@]}"
expect_rc 0 "straggler"
late=$(col "$TMP/s" late | paste -sd+ | bc)
[ "${late:-0}" -ge 1 ] && pass || fail "no late update counted: $(col "$TMP/s" late | tr '\n' ' ')"
has "$ERR" "late update of round 1 from bench bench-02 discarded" "the late update is logged"
[ "$(col "$TMP/s" clients | tr '\n' ' ')" = "2 2 " ] && pass || fail "clients: $(col "$TMP/s" clients | tr '\n' ' ')"

# 2b. a bench silent past --dead-ms (starved, stalled) is declared gone, and taken back when
# heard again: with --min-clients 3 round 2 starts only when it is back, and samples it
run fed-sim --clients 3 --data "$D" --out "$TMP/g" --rounds 2 --straggle-ms 2=3000 --dead-ms 1500 --min-completion 0.6 \
    --min-clients 3 "${M[@]}"
expect_rc 0 "a bench silent past --dead-ms"
has "$ERR" "bench bench-02 silent for 1500 ms: it is gone" "the silent bench is declared gone"
has "$ERR" "bench bench-02 is heard again: a member again" "and taken back when heard again"
[ "$(col "$TMP/g" sampled | tr '\n' ' ')" = "3 3 " ] && pass || fail "sampled: $(col "$TMP/g" sampled | tr '\n' ' ')"

# 2c. a bench's own work does not count as the coordinator's silence: bench-01 spends 2.5
# s on each update (--straggle-ms), longer than its --client-timeout of 1.5 s; it hears
# the next round (or the end) once it listens again, and every bench ends 0 (before
# 2026-12-04 bench-01 ended "nothing from the coordinator ... for 1.5 s")
run fed-sim --clients 3 --data "$D" --out "$TMP/w" --rounds 2 --straggle-ms 1=2500 --client-timeout 1.5 "${M[@]}"
expect_rc 0 "a bench busier than its --client-timeout"
[ "$(col "$TMP/w" answered | tr '\n' ' ')" = "3 3 " ] && pass || fail "answered: $(col "$TMP/w" answered | tr '\n' ' ')"
if grep -q "nothing from the coordinator" "$TMP/w/fed/bench-01.log"; then
    fail "bench-01 timed out while it worked: $(tail -c 600 "$TMP/w/fed/bench-01.log")"
else pass; fi

# 3. an unenrolled key
K="$TMP/keys"
mkdir -p "$K"
for n in server bench stranger; do
    run keygen --out "$K/$n"
    expect_rc 0 "keygen $n"
done
echo "$(cat "$K/bench.pub") bench-00" >"$K/allow.txt"
PORT=$(free_port)
"$DD_CLI" fed-server --bind "tcp://127.0.0.1:$PORT" --key "$K/server.key" --allow "$K/allow.txt" --out "$TMP/u" \
    --rounds 1 --wait-s 60 --hidden 8 --frame 50 --batch 16 --local-steps 2 >"$TMP/u.out" 2>"$TMP/u.err" &
SRV=$!
watchdog $SRV
run fed-client --server "tcp://127.0.0.1:$PORT" --server-key "$K/server.pub" --key "$K/stranger.key" --data "$D/bench-00" --connect-timeout 3
expect_rc 1 "unenrolled bench"
has "$ERR" "no welcome from the coordinator" "the bench says why"
has "$ERR" "in its allow file" "the bench names the allow file"
run fed-client --server "tcp://127.0.0.1:$PORT" --server-key "$K/server.pub" --key "$K/bench.key" --data "$D/bench-00" --connect-timeout 30
expect_rc 0 "enrolled bench"
set +e
wait $SRV
src=$?
set -e
kill "$WATCHDOG" 2>/dev/null || true
[ "$src" -eq 0 ] && pass || fail "fed-server exit $src: $(cat "$TMP/u.err")"
has "$(cat "$TMP/u.err")" "refused CURVE client" "the coordinator logs the refused key"
[ "$(col "$TMP/u" clients)" = "1" ] && pass || fail "the enrolled bench's round"

# 4. algorithms, server optimisers, DP
NP=$(json_num "$(cat "$TMP/d1/config.json")" n_params)
run fed-sim --clients 3 --data "$D" --out "$TMP/a1" --rounds 3 --algo scaffold "${M[@]}"
expect_rc 0 "scaffold"
[ "$(col "$TMP/a1" bytes_up | sort -u)" = "$((3 * (32 + 41 + 8 * NP)))" ] && pass || fail "scaffold sends update and control delta"
for opts in "--algo fedprox --mu 0.1" "--server-opt momentum --server-momentum 0.5" "--server-opt adam --server-lr 0.03"; do
    # shellcheck disable=SC2086
    run fed-sim --clients 3 --data "$D" --out "$TMP/a-${opts// /}" --rounds 3 $opts "${M[@]}"
    expect_rc 0 "$opts"
    first=$(col "$TMP/a-${opts// /}" test_nmse_db | sed -n 1p)
    last=$(col "$TMP/a-${opts// /}" test_nmse_db | tail -1)
    if awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.5) }'; then pass; else fail "$opts did not learn: $first -> $last"; fi
done
run fed-sim --clients 3 --data "$D" --out "$TMP/dp" --rounds 3 --dp-clip 0.5 --dp-noise 1.0 "${M[@]}"
expect_rc 0 "DP"
eps=$(col "$TMP/dp" epsilon | tr '\n' ' ')
python3 -c "import sys; e = [float(x) for x in sys.argv[1].split()]; sys.exit(not (len(e) == 3 and 0 < e[0] < e[1] < e[2]))" "$eps" &&
    pass || fail "epsilon per round: $eps"

# 6. a signal
"$DD_CLI" fed-sim --clients 3 --data "$D" --out "$TMP/sig" --rounds 500 "${M[@]}" >"$TMP/sig.out" 2>"$TMP/sig.err" &
SIM=$!
watchdog $SIM
for _ in $(seq 600); do
    [ -s "$TMP/sig/metrics.jsonl" ] && break
    sleep 0.1
done
kill -TERM $SIM
set +e
wait $SIM
src=$?
set -e
kill "$WATCHDOG" 2>/dev/null || true
[ "$src" -eq 0 ] && pass || fail "fed-sim after SIGTERM: exit $src: $(tail -3 "$TMP/sig.err")"
nr=$(wc -l <"$TMP/sig/metrics.jsonl")
[ "$nr" -ge 1 ] && [ "$nr" -lt 500 ] && pass || fail "rounds after SIGTERM: $nr"
run eval --run "$TMP/sig" --ckpt last --data "$D/bench-00/data.ddb"
expect_rc 0 "last.ckpt after SIGTERM"
left=$(pgrep -f "$TMP/sig/fed/bench" || true)
[ -z "$left" ] && pass || fail "benches still running after fed-sim ended: $left"

# 5. refusals
run fed-server --bind tcp://127.0.0.1:1 --key x --allow y --out "$TMP/z" --secure --agg median --min-clients 3
expect_rc 1 "--secure with --agg median"
has "$ERR" "--secure with --agg median: the coordinator sees only the sum" "--secure says why"
run fed-server --bind tcp://127.0.0.1:1 --key x --allow y --out "$TMP/z" --secure-range 2
expect_rc 2 "--secure-range without --secure"
run fed-server --bind tcp://127.0.0.1:1 --key x --allow y --out "$TMP/z" --trim 1
expect_rc 2 "--trim without --agg trimmed"
run fed-sim --clients 3 --data "$D" --out "$TMP/k" --rounds 1 --agg krum --min-clients 3 "${M[@]}"
expect_rc 1 "krum with --min-clients 3"
has "$ERR" "--agg krum with --min-clients 3: krum with --byzantine 1 needs more than 4 clients, have 3" "krum's bound is named"
run fed-sim --clients 4 --data "$D" --out "$TMP/m" --rounds 1
expect_rc 2 "a missing bench directory"
has "$ERR" "bench-03" "the missing bench is named"
run fed-client --key x --server-key y --data "$D/bench-00"
expect_rc 2 "fed-client without --server"

finish
