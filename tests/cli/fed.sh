#!/bin/bash
# Federated averaging end to end (docs/federated.md, "Tests"), through distdpd fed-sim:
# the coordinator and the benches are separate processes on loopback with CURVE keys.
#  1. 3 benches, 4 rounds of 10 local steps: the global model learns (test NMSE of the
#     last round at least 3 dB below the first), every round aggregates 3 benches, the
#     per-bench NMSE is reported, bytes_up / bytes_down are exactly 3 x (header + payload)
#     of the parameter vector, and eval reads the run's checkpoints.
#  2. message audit (--record): every message a bench sent is one of fed-hello,
#     fed-update, fed-eval-reply, ping, bye, each of its exact size (header + the
#     parameter vector for updates, fixed small sizes for the others): no I/Q leaves.
#  3. fedavg with 1 bench and 1 local step equals train-pa's first step to 1e-9 (one batch per
#     epoch): every metric of eval on the last checkpoints within 1e-9 relative.
#  4. malformed messages (--attack 1=malformed: five per round) are refused and counted,
#     and the run is identical to case 1 (test NMSE per round).
#  5. a bench sending NaN: --agg mean diverges (exit 1, "diverged"); --agg median learns.
#     Huge (+-1e6) updates: mean ends above +50 dB, trimmed mean learns; sign-flipped
#     (-10x) updates: mean gets worse every round, median learns.
#  6. --secure (secure aggregation over the same transport): every round's test NMSE
#     equals case 1's within 1e-4 dB (the benches have equal frame counts, so the
#     unweighted mean of the sum is case 1's weighted mean, up to the fixed-point
#     resolution); the benches sent no plain fed-update, only fed-secagg messages.
# Every run is bounded (fed-sim --timeout).
set -euo pipefail
source "$(dirname "$0")/common.bash"

source "$(dirname "$0")/fed_common.bash"
M=(--hidden 8 --frame 50 --batch 16 --timeout 100)

# 1. learning
R1="$TMP/r1"
run fed-sim --clients 3 --data "$D" --out "$R1" --rounds 4 --local-steps 10 --start-clients 3 --record "${M[@]}"
expect_rc 0 "fed-sim 3 benches"
has "$ERR" "round 4/4: 3/3 benches" "fed-sim prints the rounds"
[ "$(col "$R1" round | tr '\n' ' ')" = "1 2 3 4 " ] && pass || fail "metrics.jsonl rounds: $(col "$R1" round | tr '\n' ' ')"
[ "$(col "$R1" clients | sort -u)" = "3" ] && pass || fail "every round aggregates 3 benches"
first=$(col "$R1" test_nmse_db | sed -n 1p)
last=$(col "$R1" test_nmse_db | tail -1)
if awk -v a="$first" -v b="$last" 'BEGIN { exit !(b <= a - 3) }'; then pass; else fail "no learning: test NMSE $first -> $last dB"; fi
nb=$(python3 -c "import json,sys
l = [json.loads(x) for x in open(sys.argv[1])][-1]
print(sorted(l['bench_nmse_db']))" "$R1/metrics.jsonl")
[ "$nb" = "['bench-00', 'bench-01', 'bench-02']" ] && pass || fail "bench_nmse_db keys: $nb"
NP=$(json_num "$(cat "$R1/config.json")" n_params)
[ "${NP:-0}" -gt 100 ] && pass || fail "config.json n_params: $NP"
[ "$(col "$R1" bytes_up | sort -u)" = "$((3 * (32 + 41 + 4 * NP)))" ] && pass || fail "bytes_up $(col "$R1" bytes_up | head -1) for $NP parameters"
[ "$(col "$R1" bytes_down | sort -u)" = "$((3 * (32 + 39 + 4 * NP)))" ] && pass || fail "bytes_down $(col "$R1" bytes_down | head -1)"
run eval --run "$R1" --data "$D/bench-00/data.ddb" --json
expect_rc 0 "eval reads the federated run's best.ckpt"
has "$OUT" '"epoch":' "eval json"

# 2. what the benches sent
for i in 0 1 2; do
    f="$R1/fed/bench-0$i.msgs"
    bad=$(awk -v n="$NP" '
        $1 == "fed-update" && $2 == 32 + 41 + 4 * n { u++; next }
        $1 == "fed-eval-reply" && $2 == 32 + 32 { e++; next }
        $1 == "fed-hello" && $2 == 32 + 12 { next }
        ($1 == "ping" || $1 == "bye") && $2 == 32 { next }
        { print "unexpected: " $0 }
        END { if (u != 4) print "updates: " u; if (e != 4) print "evaluations: " e }' "$f")
    [ -z "$bad" ] && pass || fail "bench $i sent: $bad"
done

# 3. one bench, one step = train-pa's first step
run train-pa --data "$D/bench-00/data.ddb" --out "$TMP/tp" --epochs 1 --hidden 8 --frame 50 --batch 4096 --no-report -q
expect_rc 0 "train-pa one step"
run fed-sim --clients 1 --data "$D" --out "$TMP/fp" --rounds 1 --local-steps 1 --hidden 8 --frame 50 --batch 4096 --timeout 100
expect_rc 0 "fed-sim one bench one step"
strip() { sed 's/"run":"[^"]*",//; s/,"eval_time_s":[^,}]*//'; }
run eval --run "$TMP/tp" --ckpt last --data "$D/bench-00/data.ddb" --json
A=$(strip <<<"$OUT")
run eval --run "$TMP/fp" --ckpt last --data "$D/bench-00/data.ddb" --json
B=$(strip <<<"$OUT")
# Equal to rounding: both compute the same gradient (the same batch chunks), but the
# federated model is w0 + (p - w0), which in float32 is not always p itself (p - w0 is
# exact only when p and w0 are within a factor 2 of each other); so every number of the
# evaluation within 1e-9 relative (an update lost or applied twice moves them by ~1e-2).
res=$(python3 -c "import json,sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
bad = [k for k in a if k not in b or (isinstance(a[k], float) and abs(a[k] - b[k]) > 1e-9 * max(1.0, abs(a[k])))
       or (not isinstance(a[k], float) and a[k] != b[k])]
print('ok' if a and not bad and len(a) == len(b) else 'differ: ' + ' '.join(bad))" "$A" "$B")
[ "$res" = ok ] && pass || fail "fedavg 1 bench 1 step differs from train-pa's first step ($res): $A vs $B"

# 4. malformed messages refused, the run unchanged
R4="$TMP/r4"
run fed-sim --clients 3 --data "$D" --out "$R4" --rounds 4 --local-steps 10 --start-clients 3 --attack 1=malformed "${M[@]}"
expect_rc 0 "fed-sim with a bench sending malformed messages"
[ "$(col "$R4" refused | sort -u)" = "5" ] && pass || fail "refused per round: $(col "$R4" refused | tr '\n' ' ')"
has "$ERR" "CRC32C mismatch" "the bad CRC is named"
has "$ERR" "nparams $((NP + 1)) but the model has $NP parameters" "the wrong vector length is named"
[ "$(col "$R4" test_nmse_db)" = "$(col "$R1" test_nmse_db)" ] && pass || fail "malformed messages changed the run"

# 5. Byzantine NaN: mean diverges, median does not
run fed-sim --clients 3 --data "$D" --out "$TMP/r5m" --rounds 3 --local-steps 10 --start-clients 3 --attack 0=nan --agg mean "${M[@]}"
expect_rc 1 "mean with a NaN bench"
has "$ERR" "diverged at round 1" "mean diverges"
run fed-sim --clients 3 --data "$D" --out "$TMP/r5d" --rounds 3 --local-steps 10 --start-clients 3 --attack 0=nan --agg median "${M[@]}"
expect_rc 0 "median with a NaN bench"
first=$(col "$TMP/r5d" test_nmse_db | sed -n 1p)
last=$(col "$TMP/r5d" test_nmse_db | tail -1)
if awk -v a="$first" -v b="$last" 'BEGIN { exit !(b <= a - 2) }'; then pass; else fail "median did not learn: $first -> $last dB"; fi
learns() { # RUN MARGIN: the last round's test NMSE at least MARGIN dB below the first
    awk -v a="$(col "$1" test_nmse_db | sed -n 1p)" -v b="$(col "$1" test_nmse_db | tail -1)" -v m="$2" 'BEGIN { exit !(b <= a - m) }'
}
for atk in huge:trimmed signflip:median; do
    run fed-sim --clients 3 --data "$D" --out "$TMP/r5-${atk%%:*}-mean" --rounds 3 --local-steps 10 --start-clients 3 --attack "0=${atk%%:*}" --agg mean "${M[@]}"
    expect_rc 0 "mean with a ${atk%%:*} bench"
    run fed-sim --clients 3 --data "$D" --out "$TMP/r5-${atk%%:*}-robust" --rounds 3 --local-steps 10 --start-clients 3 --min-clients 3 --attack "0=${atk%%:*}" --agg "${atk##*:}" "${M[@]}"
    expect_rc 0 "${atk##*:} with a ${atk%%:*} bench"
    learns "$TMP/r5-${atk%%:*}-robust" 2 && pass || fail "${atk##*:} did not learn against ${atk%%:*}: $(col "$TMP/r5-${atk%%:*}-robust" test_nmse_db | tr '\n' ' ')"
done
python3 -c "import json,sys; sys.exit(not json.loads(open(sys.argv[1]).readlines()[-1])['test_nmse_db'] > 50)" "$TMP/r5-huge-mean/metrics.jsonl" &&
    pass || fail "mean against huge updates: $(col "$TMP/r5-huge-mean" test_nmse_db | tr '\n' ' ')"
python3 -c "import json,sys
v = [json.loads(l)['test_nmse_db'] for l in open(sys.argv[1])]
sys.exit(not (v[0] < v[1] < v[2]))" "$TMP/r5-signflip-mean/metrics.jsonl" && pass || fail "mean against sign flips: $(col "$TMP/r5-signflip-mean" test_nmse_db | tr '\n' ' ')"

# 6. secure aggregation
R6="$TMP/r6"
run fed-sim --clients 3 --data "$D" --out "$R6" --rounds 4 --local-steps 10 --start-clients 3 --min-clients 2 --secure --record "${M[@]}"
expect_rc 0 "fed-sim --secure"
python3 - "$R1/metrics.jsonl" "$R6/metrics.jsonl" <<'PY' && pass || fail "--secure differs from the plain mean"
import json, sys
a = [json.loads(l)["test_nmse_db"] for l in open(sys.argv[1])]
b = [json.loads(l)["test_nmse_db"] for l in open(sys.argv[2])]
sys.exit(not (len(a) == len(b) == 4 and all(abs(x - y) < 1e-4 for x, y in zip(a, b))))
PY
for i in 0 1 2; do
    f="$R6/fed/bench-0$i.msgs"
    types=$(awk '{ print $1 }' "$f" | sort -u | tr '\n' ' ')
    [ "$types" = "bye fed-eval-reply fed-hello fed-secagg " ] || [ "$types" = "bye fed-eval-reply fed-hello fed-secagg ping " ] &&
        pass || fail "bench $i sent with --secure: $types"
    [ "$(awk '$1 == "fed-secagg"' "$f" | wc -l)" -eq 16 ] && pass || fail "bench $i: 4 secure-aggregation messages per round"
done

finish
