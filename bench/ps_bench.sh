#!/bin/bash
# Convergence of parameter-server training (docs/ps.md, "Convergence"): test NMSE against
# wall time for --staleness 0, 2, 8 and inf with W workers, without and with a straggler
# (--straggle delay_ms=D on one worker), each through distdpd ps-local (2 servers).
#
#   bash bench/ps_bench.sh [DISTDPD] [EPOCHS] [WORKERS] [DELAY_MS] [OUTDIR]
#
# Data: ../shared/data/opendpd/DPA_200MHz when present, else a simulated set. Model: gru
# (hidden 23, frame 200, batch 64, AdamW 5e-3, constant lr). Prints one table row per run:
# final test NMSE, wall time, the time at which the run first reached the synchronous
# run's final test NMSE (from each epoch's end, wall clock of metrics.jsonl lines: the
# cumulative time_s + eval_time_s), and the speed-up against s = 0 of the same scenario.
set -euo pipefail
DD=${1:-build/distdpd}
EPOCHS=${2:-6}
W=${3:-4}
DELAY=${4:-5}
OUT=${5:-$(mktemp -d /tmp/ps_bench.XXXXXX)}
mkdir -p "$OUT"
DATA=../shared/data/opendpd/DPA_200MHz
if [ ! -d "$DATA" ]; then
    DATA="$OUT/sim"
    "$DD" simulate --out "$DATA" --samples 40000 -q
fi
echo "data $DATA, $EPOCHS epochs, $W workers, straggler delay ${DELAY} ms, runs in $OUT"
for scen in none straggler; do
    for s in 0 2 8 inf; do
        extra=()
        [ $scen = straggler ] && extra=(--straggle "delay_ms=$DELAY")
        t0=$(date +%s.%N)
        timeout 1800 "$DD" ps-local --servers 2 --workers "$W" --timeout 1700 -- train-pa --data "$DATA" --model gru \
            --epochs "$EPOCHS" --lr-schedule constant --no-report -q --staleness "$s" --lease-ms 60000 "${extra[@]}" \
            --out "$OUT/${scen}_s$s" >/dev/null 2>"$OUT/${scen}_s$s.err" || echo "run ${scen} s=$s failed: $(tail -3 "$OUT/${scen}_s$s.err")"
        t1=$(date +%s.%N)
        echo "$scen $s $(echo "$t1 - $t0" | bc)" >>"$OUT/walls.txt"
    done
done
python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
walls = {}
for l in open(os.path.join(out, 'walls.txt')):
    sc, s, w = l.split()
    walls[(sc, s)] = float(w)
print("| scenario | staleness | final test NMSE (dB) | best test NMSE (dB) | training wall time (s) | reaches sync final NMSE at (s) | speed-up vs s = 0 | staleness max | update lag mean |")
print("|---|---|---|---|---|---|---|---|---|")
for sc in ('none', 'straggler'):
    curves = {}
    for s in ('0', '2', '8', 'inf'):
        p = os.path.join(out, '%s_s%s' % (sc, s), 'metrics.jsonl')
        if not os.path.exists(p):
            continue
        t, pts, smax, lags = 0.0, [], 0, []
        for l in open(p):
            r = json.loads(l)
            t += r['time_s'] + r['eval_time_s']
            pts.append((t, r['test_nmse_db']))
            smax = max(smax, len(r['ps_staleness_hist']) - 1)
            h = r['ps_update_lag_hist']
            lags.append(sum(i * c for i, c in enumerate(h)) / max(1, sum(h)))
        curves[s] = (pts, smax, sum(lags) / len(lags))
    if '0' not in curves:
        continue
    target = curves['0'][0][-1][1]
    t_sync = next(t for t, v in curves['0'][0] if v <= target + 1e-9)
    for s, (pts, smax, lag) in curves.items():
        reach = next((t for t, v in pts if v <= target), None)
        print("| %s | %s | %.2f | %.2f | %.1f | %s | %s | %d | %.2f |" % (
            'no straggler' if sc == 'none' else 'one straggler', s, pts[-1][1], min(v for _, v in pts), pts[-1][0],
            '%.1f' % reach if reach is not None else 'not reached', '%.2fx' % (t_sync / reach) if reach else '-', smax, lag))
PY
