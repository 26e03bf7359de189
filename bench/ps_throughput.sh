#!/bin/bash
# Parameter-server throughput on this machine against `distdpd plan --ps-servers`
# (docs/ps.md, "Throughput"). bench/bench_ps.c runs K ps-server processes and N worker
# processes on loopback, each worker doing steps of one push of P floats and one full
# pull. First the link is fitted from K = 1, N = 1 runs at four sizes (t = 4 alpha1 +
# 2 M beta1, least squares of the relative errors), written as a calibration file; then each (K, N, R, P) is
# measured and predicted by `distdpd plan --ps-servers K --workers N --replicas R
# --opt sgd --calibration FIT --json` (R > 0 with plain SGD replicates 1 float per
# parameter).
#
#   bash bench/ps_throughput.sh [BUILD_DIR] [OUTDIR]
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-$(mktemp -d /tmp/ps_tp.XXXXXX)}
mkdir -p "$OUT"
export DD_CLI=$(realpath "$BUILD/distdpd")
cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Itests bench/bench_ps.c -L"$BUILD" -ldistdpd -ldistdpd_rf \
    -Wl,-rpath,"$(realpath "$BUILD")" -lzmq -lm -o "$OUT/bench_ps"
run() { # K N P STEPS R
    "$OUT/bench_ps" "$@" | sed -n 's/^json: //p'
}
echo "fit: K = 1, N = 1" >&2
: >"$OUT/fit.jsonl"
for p in 1000:2000 10000:1000 100000:300 1000000:40; do
    run 1 1 "${p%%:*}" "${p##*:}" 0 >>"$OUT/fit.jsonl"
done
python3 - "$OUT/fit.jsonl" "$OUT/fit.json" <<'PY'
import json, sys
pts = [json.loads(l) for l in open(sys.argv[1])]
# t = 4 a + 2 M b, M = 4 P bytes: least squares in (a, b) of the relative errors
xs = [(4.0, 8.0 * p["params"]) for p in pts]; ys = [p["step_s"] for p in pts]
ws = [1.0 / (y * y) for y in ys]
s11 = sum(w * x[0] * x[0] for w, x in zip(ws, xs)); s12 = sum(w * x[0] * x[1] for w, x in zip(ws, xs))
s22 = sum(w * x[1] * x[1] for w, x in zip(ws, xs))
t1 = sum(w * x[0] * y for w, x, y in zip(ws, xs, ys)); t2 = sum(w * x[1] * y for w, x, y in zip(ws, xs, ys))
det = s11 * s22 - s12 * s12
a = (t1 * s22 - t2 * s12) / det; b = (s11 * t2 - s12 * t1) / det
a = max(a, 0.0)
json.dump({"format": "distdpd-calibration", "version": 1, "ranks": 2, "host": "loopback",
           "method": "bench/ps_throughput.sh: K = 1, N = 1 push + pull steps",
           "alpha_s": a, "beta_s_per_byte": b, "gamma_s_per_byte": 0,
           "alpha_oneway_s": a, "beta_oneway_s_per_byte": b}, open(sys.argv[2], "w"))
print("fitted one-way alpha %.1f us, bandwidth %.3f GB/s" % (a * 1e6, 1e-9 / b))
for p, (x, y) in zip(pts, zip(xs, ys)):
    print("  P %8d: step %.3f ms, fit %.3f ms" % (p["params"], y * 1e3, (a * x[0] + b * x[1]) * 1e3))
PY
: >"$OUT/runs.jsonl"
for cfg in "1 1 100000 300 0" "1 2 100000 300 0" "1 4 100000 200 0" "2 4 100000 200 0" "4 4 100000 200 0" \
    "2 4 100000 200 1" "1 4 1000000 30 0" "2 4 1000000 30 0" "4 4 1000000 30 0"; do
    set -- $cfg
    m=$(run "$@")
    pl=$("$DD_CLI" plan --params "$3" --ps-servers "$1" --workers "$2" --replicas "$5" --opt sgd \
        --calibration "$OUT/fit.json" --json)
    echo "{\"measured\": $m, \"plan\": $pl}" >>"$OUT/runs.jsonl"
done
python3 - "$OUT/runs.jsonl" <<'PY'
import json, sys
print("| servers K | workers N | replicas R | params P | step measured (ms) | step model (ms) | measured / model | pushes/s per server measured | model | bytes per worker and step measured | model 2M | busiest server's share (model 1/K) | resends |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for l in open(sys.argv[1]):
    r = json.loads(l); m = r["measured"]; p = r["plan"]
    print("| %d | %d | %d | %d | %.2f | %.2f | %.2fx | %.0f | %.0f | %d | %d | %.2f (%.2f) | %d |" % (
        m["servers"], m["workers"], m["replicas"], m["params"], m["step_s"] * 1e3, p["step_s"] * 1e3,
        m["step_s"] / p["step_s"], m["pushes_per_s_server"], p["pushes_per_s_server"], m["bytes_step_worker"],
        p["worker_bytes_step"], m["max_share"], 1.0 / m["servers"], m["resends"]))
PY
echo "runs in $OUT" >&2
