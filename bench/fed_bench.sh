#!/usr/bin/env bash
# Federated averaging measured on simulated non-IID benches (issue 15; docs/federated.md,
# "Measured"). By hand, not a timed test:
#
#   bash bench/fed_bench.sh [BUILD_DIR [OUT_DIR]]     (defaults: build, BUILD_DIR/fed-bench)
#
# Writes OUT_DIR/fed_bench.md (markdown tables) and prints it; every run's directory and
# log stay under OUT_DIR. Five experiments, all with the same model and local recipe
# (GRU, FB_HIDDEN hidden units, frames of 50, batch 32, AdamW lr 5e-3):
#  (a) communication: FedAvg (E = 1 and 2 local epochs, FB_ROUNDS rounds) on FB_BENCHES
#      low-heterogeneity benches against synchronous data parallelism (mpirun -np
#      FB_BENCHES train-pa on the union of the benches, global batch 32 x FB_BENCHES, one
#      allreduce per step, FB_ROUNDS epochs at lr 5e-3 and 1e-2). Target NMSE = the worse
#      of the two best curves + 0.5 dB; exchanges until the curve first reaches it (DP: the
#      step count at the end of the first epoch that does, so an upper bound within one
#      epoch); final NMSE of both by `distdpd eval` on the union's test split (the same
#      metric for both); bytes each client sends and receives until the target.
#  (b) non-IID: fedavg, fedprox (mu FB_MU) and scaffold on high-heterogeneity benches
#      (AdamW, and fedavg / scaffold with SGD lr FB_SGD_LR); per bench the global model's
#      test NMSE (eval) against a model trained only on that bench for the same number of
#      epochs, and the global NMSE (the coordinator's, over the union of the test
#      splits); the same for FedAvg on the low benches.
#  (c) Byzantine: the last of the low benches sends nan, huge or sign-flipped updates;
#      mean, median, trimmed mean (trim 1) and Krum (f = 1) against the clean FedAvg run.
#  (d) cost of privacy: seconds and bytes per round of FedAvg with DP (--dp-clip, a few
#      --dp-noise) and with --secure against plain FedAvg, and NMSE against epsilon (a run
#      that fed-server refuses, e.g. --secure before it is wired in, shows its message).
#  (e) DPA_200MHz (FB_DPA, when present) split by drive and by time into 4 benches with
#      `distdpd split`: FedAvg against each bench's own model and one model on all data.
# Sizes (environment): FB_BENCHES (8), FB_SAMPLES (6000: base samples per bench, the
# high benches 3000..12000), FB_HIDDEN (12), FB_ROUNDS (20), FB_BYZ_ROUNDS (12),
# FB_SECTIONS ("a b c d e": which experiments), FB_MU (0.01), FB_SGD_LR (0.05), FB_CLIP
# (1.0), FB_NOISE ("0.01 0.03 0.1 0.3 1"). About 6 minutes on 2 loaded cores (load 13-18).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=${2:-$BUILD/fed-bench}
CLI=$PWD/$BUILD/distdpd
NB=${FB_BENCHES:-8}
SAMPLES=${FB_SAMPLES:-6000}
HIDDEN=${FB_HIDDEN:-12}
ROUNDS=${FB_ROUNDS:-20}
BROUNDS=${FB_BYZ_ROUNDS:-12}
MU=${FB_MU:-0.01}
SGD_LR=${FB_SGD_LR:-0.05}
CLIP=${FB_CLIP:-1.0}
NOISES=${FB_NOISE:-0.01 0.03 0.1 0.3 1}
SECTIONS=${FB_SECTIONS:-a b c d e}
if [ ! -x "$CLI" ]; then echo "no $CLI: build first (make build)" >&2; exit 1; fi
command -v python3 >/dev/null || { echo "bench/fed_bench.sh needs python3 (JSON)" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "bench/fed_bench.sh needs mpirun" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1
rm -rf "$OUT"
mkdir -p "$OUT"
MD=$OUT/fed_bench.md
M=(--model gru --hidden "$HIDDEN" --frame 50 --batch 32 --lr 5e-3)
T0=$(date +%s)

simd_path() { # the level the library picks: the CPU's best, lowered by DD_SIMD
    local cpu=generic
    grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && cpu=avx2
    grep -qw avx512f /proc/cpuinfo && cpu=avx512
    case "${DD_SIMD:-}" in
    generic) echo "generic (DD_SIMD; CPU: $cpu)" ;;
    avx2) [ "$cpu" = generic ] && echo generic || echo "avx2 (DD_SIMD; CPU: $cpu)" ;;
    *) echo "$cpu" ;;
    esac
}
load() { cut -d' ' -f1-3 /proc/loadavg; }
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
say() { echo "$*" | tee -a "$MD"; }
step() { echo "[$(($(date +%s) - T0)) s] $*" >&2; }

# JSON helpers (python3): every analysis reads the runs' own files
py() { python3 - "$@"; }
# fed-sim bounded in time, the exit status kept in RUN.rc. --dead-ms 60000: on a loaded
# machine a bench can be starved for more than the default 10 s during its local epoch,
# and a bench declared gone is not taken back (its messages are refused until the run ends)
fedsim() { # RUN ARGS...
    local run=$1
    shift
    set +e
    local n=${FS_N:-$NB}
    "$CLI" fed-sim --clients "$n" --start-clients "$n" --min-clients "$n" --out "$run" "${M[@]}" --timeout 600 --client-timeout 120 --dead-ms 60000 "$@" \
        >"$run.log" 2>&1
    echo $? >"$run.rc"
    set -e
}
evalnmse() { # RUN DATA: test NMSE (segmented, OpenDPD) of RUN's last model on DATA
    "$CLI" eval --run "$1" --ckpt last --data "$2" --json --no-true-pa -q 2>/dev/null |
        python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["test_nmse_db"])' 2>/dev/null || echo nan
}

say "# distdpd federated benchmark"
say ""
say "- date: $(date -u +%Y-%m-%dT%H:%MZ); processor: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores; SIMD path: $(simd_path)"
say "- load average at the start: $(load)"
say "- model: GRU hidden $HIDDEN, frames of 50, local batch 32, AdamW lr 5e-3; $NB benches of about $SAMPLES samples (0.6/0.2/0.2 split)"

# ---- data ----
step "simulating the benches"
"$CLI" simulate --benches "$NB" --heterogeneity low --samples "$SAMPLES" --seed 1 --out "$OUT/low" >"$OUT/low.txt"
"$CLI" simulate --benches "$NB" --heterogeneity high --samples "$SAMPLES" --seed 1 --out "$OUT/high" >"$OUT/high.txt"
# the union of the low benches (one spec: the low benches share the layout)
mkdir -p "$OUT/union"
cp "$OUT/low/bench-00/spec.json" "$OUT/union/"
for f in {train,val,test}_{input,output}.csv; do
    { echo "I,Q"; for b in "$OUT"/low/bench-*/; do tail -n +2 "$b/$f"; done; } >"$OUT/union/$f"
done

# ---- (a) communication ----
if want a; then
step "(a) FedAvg E=1, E=2 and synchronous data parallelism"
fedsim "$OUT/a-fedavg-e1" --data "$OUT/low" --rounds "$ROUNDS" --local-epochs 1
fedsim "$OUT/a-fedavg-e2" --data "$OUT/low" --rounds "$ROUNDS" --local-epochs 2
for lr in 5e-3 1e-2; do
    set +e
    mpirun -np "$NB" "$CLI" train-pa --data "$OUT/union" --model gru --hidden "$HIDDEN" --frame 50 --lr "$lr" \
        --batch $((32 * NB)) --epochs "$ROUNDS" \
        --no-report --out "$OUT/a-dp-$lr" >"$OUT/a-dp-$lr.log" 2>&1
    echo $? >"$OUT/a-dp-$lr.rc"
    set -e
done
for r in a-fedavg-e1 a-fedavg-e2 a-dp-5e-3 a-dp-1e-2; do
    echo "$(evalnmse "$OUT/$r" "$OUT/union")" >"$OUT/$r.final"
done
py "$OUT" "$NB" <<'EOF' | tee -a "$MD"
import json, math, os, sys
out, nb = sys.argv[1], int(sys.argv[2])
def lines(run):
    p = os.path.join(out, run, "metrics.jsonl")
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else []
def final(run):
    try: return float(open(os.path.join(out, run + ".final")).read())
    except Exception: return float("nan")
npar = json.load(open(os.path.join(out, "a-fedavg-e1", "config.json")))["n_params"]
fed = {r: lines(r) for r in ("a-fedavg-e1", "a-fedavg-e2")}
dps = {r: lines(r) for r in ("a-dp-5e-3", "a-dp-1e-2")}
best = lambda L, k: min((l[k] for l in L if l.get(k) is not None and math.isfinite(l[k])), default=float("nan"))
bdp = min(dps, key=lambda r: best(dps[r], "test_nmse_db"))  # the better DP run
target = max(best(fed["a-fedavg-e1"], "test_nmse_db"), best(dps[bdp], "test_nmse_db")) + 0.5
print("\n## (a) Communication: FedAvg against synchronous data parallelism\n")
print("%d low-heterogeneity benches; data parallelism: `mpirun -np %d distdpd train-pa` on their union, "
      "global batch %d (32 per rank), one allreduce of the gradient per step (counted as the %d floats of the "
      "parameter vector fed-sim sends: the model's parameters in 16-float-aligned tensors). Target test NMSE: %.2f dB "
      "(the worse of the best FedAvg E=1 and best DP curve + 0.5 dB). Exchanges = rounds (FedAvg: one "
      "download + one upload per client) or steps (DP: one allreduce); DP's count is at the end of the first "
      "epoch that reaches the target. Bytes per client until the target: FedAvg from the coordinator's counts "
      "(headers included, evaluation traffic excluded), DP a ring allreduce: 2(N-1)/N x 4 bytes x parameters "
      "sent and as many received per step. Curves: FedAvg the coordinator's NMSE per round (error sums over "
      "the union of the test splits), DP train-pa's per epoch (OpenDPD: mean of the dB of nperseg segments); "
      "the pooled figure reads worse than the segmented one on the same model (compare FedAvg's last curve "
      "value with its eval), so the exchange ratio leans towards DP. Final NMSE: `distdpd eval` of the last "
      "model on the union's test split (segmented, the same metric for all).\n" % (nb, nb, 32 * nb, npar, target))
print("| run | exchanges to target | bytes sent + received per client to target | best curve NMSE (dB) | last curve NMSE (dB) | final NMSE, eval (dB) |")
print("|---|---:|---:|---:|---:|---:|")
res = {}
for r, L in fed.items():
    hit = next((l for l in L if math.isfinite(l.get("test_nmse_db", float("nan"))) and l["test_nmse_db"] <= target), None)
    n = hit["round"] if hit else None
    per = sum(l["bytes_up"] + l["bytes_down"] for l in L if hit and l["round"] <= n) / nb if hit else None
    res[r] = n
    print("| FedAvg E=%s, %d rounds | %s | %s | %.2f | %.2f | %.2f |" % (r[-1], len(L), n if n else "not reached",
          "%.0f" % per if per else "-", best(L, "test_nmse_db"), L[-1]["test_nmse_db"] if L else float("nan"), final(r)))
for r, L in dps.items():
    hit = next((l for l in L if math.isfinite(l.get("test_nmse_db", float("nan"))) and l["test_nmse_db"] <= target), None)
    n = hit["step"] if hit else None
    per = n * 2 * 2 * (nb - 1) / nb * 4 * npar if hit else None
    res[r] = n
    print("| DP lr %s, %d epochs (%d steps) | %s | %s | %.2f | %.2f | %.2f |" % (r[5:], len(L), L[-1]["step"] if L else 0,
          n if n else "not reached", "%.0f" % per if per else "-", best(L, "test_nmse_db"),
          L[-1]["test_nmse_db"] if L else float("nan"), final(r)))
for e in ("a-fedavg-e1", "a-fedavg-e2"):
    if res.get(e) and res.get(bdp):
        print("\nFedAvg E=%s against DP lr %s: %.0fx fewer exchanges to %.2f dB; final NMSE difference %.2f dB (eval)."
              % (e[-1], bdp[5:], res[bdp] / res[e], target, final(e) - final(bdp)))
EOF

fi

# ---- (b) non-IID ----
if want b; then
step "(b) fedavg / fedprox / scaffold on the high benches, local-only models"
fedsim "$OUT/b-fedavg" --data "$OUT/high" --rounds "$ROUNDS" --local-epochs 1
fedsim "$OUT/b-fedprox" --data "$OUT/high" --rounds "$ROUNDS" --local-epochs 1 --algo fedprox --mu "$MU"
fedsim "$OUT/b-scaffold" --data "$OUT/high" --rounds "$ROUNDS" --local-epochs 1 --algo scaffold
# SCAFFOLD's control variates assume plain SGD local steps: both again with SGD
fedsim "$OUT/b-fedavg-sgd" --data "$OUT/high" --rounds "$ROUNDS" --local-epochs 1 --opt sgd --lr "$SGD_LR"
fedsim "$OUT/b-scaffold-sgd" --data "$OUT/high" --rounds "$ROUNDS" --local-epochs 1 --algo scaffold --opt sgd --lr "$SGD_LR"
for ((k = 0; k < NB; k++)); do
    b=$(printf 'bench-%02d' "$k")
    for h in high low; do
        "$CLI" train-pa --data "$OUT/$h/$b" "${M[@]}" --epochs "$ROUNDS" --no-report --out "$OUT/b-local-$h-$b" \
            >"$OUT/b-local-$h-$b.log" 2>&1 || true
    done
    for r in b-fedavg b-fedprox b-scaffold b-fedavg-sgd b-scaffold-sgd b-local-high-$b; do
        echo "$(evalnmse "$OUT/$r" "$OUT/high/$b")" >"$OUT/$r.$b.final"
    done
    for r in a-fedavg-e1 b-local-low-$b; do
        echo "$(evalnmse "$OUT/$r" "$OUT/low/$b")" >"$OUT/$r.$b.final"
    done
done
py "$OUT" "$NB" "$MU" "$SGD_LR" <<'EOF' | tee -a "$MD"
import json, math, os, sys
out, nb, mu, sgdlr = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def rd(p):
    try: return float(open(os.path.join(out, p)).read())
    except Exception: return float("nan")
def last(run):
    p = os.path.join(out, run, "metrics.jsonl")
    L = [json.loads(l) for l in open(p)] if os.path.exists(p) else []
    return L[-1] if L else {}
def table(het, algos, heads):
    bl = json.load(open(os.path.join(out, het, "benches.json")))["list"]
    print("| bench | PA family | layout | train samples | %s | own data only |" % " | ".join(heads))
    print("|---|---|---|---:|%s---:|" % ("---:|" * len(algos)))
    small = min(range(nb), key=lambda k: bl[k]["measured"]["train"])
    own = [rd("b-local-%s-%s.%s.final" % (het, b["name"], b["name"])) for b in bl]
    for k in range(nb):
        b = bl[k]
        vals = [rd("%s.%s.final" % (a, b["name"])) for a in algos] + [own[k]]
        print("| %s%s | %s | %s | %d | %s |" % (b["name"], " (smallest)" if k == small else "", b["pa_family"], b["layout"],
              b["measured"]["train"], " | ".join("%.2f" % v for v in vals)))
    g = [last(a).get("test_nmse_db", float("nan")) for a in algos]
    print("| global (coordinator) | | | | %s | |" % " | ".join("%.2f" % v for v in g))
    print()
    for a, h in zip(algos, heads):
        v = [rd("%s.%s.final" % (a, b["name"])) for b in bl]
        better = sum(1 for x, y in zip(v, own) if x < y)
        print("- %s: the global model beats the own-data model on %d of %d benches; smallest bench %s: %.2f vs %.2f dB."
              % (h, better, nb, bl[small]["name"], v[small], own[small]))
print("\n## (b) Non-IID: FedAvg, FedProx (mu %s), SCAFFOLD on high-heterogeneity benches\n" % mu)
print("Test NMSE (dB, `distdpd eval` of the last model on each bench's test split) of the global model of each "
      "algorithm and of a model trained only on the bench's own data for as many epochs as there were rounds "
      "(AdamW lr 5e-3). Local optimiser AdamW lr 5e-3, and SGD lr %s for FedAvg and SCAFFOLD (whose control "
      "variates assume SGD steps). Global: the coordinator's NMSE over the union of the test splits.\n" % sgdlr)
table("high", ["b-fedavg", "b-fedprox", "b-scaffold", "b-fedavg-sgd", "b-scaffold-sgd"],
      ["fedavg", "fedprox", "scaffold", "fedavg (sgd)", "scaffold (sgd)"])
print("\nThe same comparison on the low-heterogeneity benches (FedAvg E=1 of (a)):\n")
table("low", ["a-fedavg-e1"], ["fedavg"])
EOF

fi

# ---- (c) Byzantine ----
if want c; then
step "(c) Byzantine: 1 of $NB benches attacking"
BAD=$((NB - 1))
fedsim "$OUT/c-clean-mean" --data "$OUT/low" --rounds "$BROUNDS" --local-epochs 1
for agg in median trimmed krum; do
    extra=()
    [ $agg = trimmed ] && extra=(--trim 1)
    [ $agg = krum ] && extra=(--byzantine 1)
    fedsim "$OUT/c-clean-$agg" --data "$OUT/low" --rounds "$BROUNDS" --local-epochs 1 --agg $agg "${extra[@]}"
done
for atk in nan huge signflip; do
    for agg in mean median trimmed krum; do
        extra=()
        [ $agg = trimmed ] && extra=(--trim 1)
        [ $agg = krum ] && extra=(--byzantine 1)
        fedsim "$OUT/c-$atk-$agg" --data "$OUT/low" --rounds "$BROUNDS" --local-epochs 1 --agg $agg "${extra[@]}" \
            --attack "$BAD=$atk"
    done
done
py "$OUT" "$NB" "$BAD" <<'EOF' | tee -a "$MD"
import json, math, os, sys
out, nb, bad = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def run(r):
    p = os.path.join(out, r, "metrics.jsonl")
    L = [json.loads(l) for l in open(p)] if os.path.exists(p) else []
    rc = open(os.path.join(out, r + ".rc")).read().strip() if os.path.exists(os.path.join(out, r + ".rc")) else "?"
    return L, rc
def cell(r, ref):
    L, rc = run(r)
    v = L[-1].get("test_nmse_db") if L else None
    if v is None or not math.isfinite(v):
        why = "diverged" if rc != "0" else "no NMSE"
        return "%s (exit %s, %d rounds logged)" % (why, rc, len(L))
    s = "%.2f" % v
    if ref is not None and math.isfinite(ref): s += " (%+.2f)" % (v - ref)
    if v > -3: s += " diverged"
    return s
clean = run("c-clean-mean")[0]
ref = clean[-1]["test_nmse_db"] if clean else None
print("\n## (c) Byzantine benches: bench-%02d of %d sends bad updates\n" % (bad, nb))
print("Final test NMSE (dB, coordinator, union of the test splits) after the last round, and its difference "
      "from the clean FedAvg run (mean, no attacker: %s dB). nan: NaN updates; huge: +-1e6; signflip: -10 x "
      "its update. trimmed: --trim 1; krum: --byzantine 1.\n" % ("%.2f" % ref if ref is not None else "?"))
print("| attack | mean | median | trimmed mean | Krum |")
print("|---|---:|---:|---:|---:|")
print("| none | %s |" % " | ".join(cell("c-clean-" + a, ref) for a in ("mean", "median", "trimmed", "krum")))
for atk in ("nan", "huge", "signflip"):
    print("| %s | %s |" % (atk, " | ".join(cell("c-%s-%s" % (atk, a), ref) for a in ("mean", "median", "trimmed", "krum"))))
EOF

fi

# ---- (d) privacy: DP and secure aggregation ----
if want d; then
step "(d) DP noise levels and secure aggregation"
fedsim "$OUT/d-plain" --data "$OUT/low" --rounds "$BROUNDS" --local-epochs 1
for s in $NOISES; do
    fedsim "$OUT/d-noise-$s" --data "$OUT/low" --rounds "$BROUNDS" --local-epochs 1 --dp-clip "$CLIP" --dp-noise "$s"
done
fedsim "$OUT/d-secure" --data "$OUT/low" --rounds "$BROUNDS" --local-epochs 1 --secure
fedsim "$OUT/d-secure-dp" --data "$OUT/low" --rounds "$BROUNDS" --local-epochs 1 --secure --dp-clip "$CLIP" --dp-noise 0.1
py "$OUT" "$NB" "$CLIP" $NOISES <<'EOF' | tee -a "$MD"
import json, math, os, statistics, sys
out, nb, clip, noises = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
def run(r):
    p = os.path.join(out, r, "metrics.jsonl")
    L = [json.loads(l) for l in open(p)] if os.path.exists(p) else []
    return L
def row(label, r, base):
    L = run(r)
    if not L:
        log = open(os.path.join(out, r + ".log")).read().strip().splitlines() if os.path.exists(os.path.join(out, r + ".log")) else []
        why = next((l for l in log if l.startswith("distdpd fed-server:")), log[-1] if log else "no output")
        return "| %s | - | - | - | - | - | %s |" % (label, why.replace("|", "/")[:160])
    t = statistics.median(l["time_s"] for l in L)
    by = statistics.median(l["bytes_up"] + l["bytes_down"] for l in L)
    eps = L[-1].get("epsilon")
    bt, bb = base
    return "| %s | %.3f | %+.0f %% | %.0f | %+.1f %% | %.2f | %s |" % (label, t, 100 * (t / bt - 1), by, 100 * (by / bb - 1),
        L[-1].get("test_nmse_db", float("nan")), "%.3g" % eps if eps is not None else "-")
P = run("d-plain")
base = (statistics.median(l["time_s"] for l in P), statistics.median(l["bytes_up"] + l["bytes_down"] for l in P)) if P else (float("nan"), float("nan"))
print("\n## (d) Privacy: differential privacy and secure aggregation against plain FedAvg\n")
print("%d low benches, %d rounds, every bench every round (q = 1). Per round: median coordinator seconds "
      "(sampling to evaluation, evaluation included) and bytes up + down (all benches); final test NMSE; "
      "epsilon at delta 1e-5 after the last round (RDP accountant). DP: each update clipped to L2 norm %s, "
      "Gaussian noise sigma x %s on the sum.\n" % (nb, len(P), clip, clip))
print("| run | s per round | vs plain | bytes per round | vs plain | final NMSE (dB) | epsilon |")
print("|---|---:|---:|---:|---:|---:|---:|")
print(row("plain FedAvg", "d-plain", base))
for s in noises: print(row("DP clip %s, noise %s" % (clip, s), "d-noise-" + s, base))
print(row("secure aggregation (ring 2^32)", "d-secure", base))
print(row("secure + DP clip %s, noise 0.1" % clip, "d-secure-dp", base))
EOF
if ! [ -s "$OUT/d-secure/metrics.jsonl" ] && command -v mpicc >/dev/null; then
    # --secure is not in fed-server: the protocol's cost alone (bench/bench_secagg.c, NB clients)
    if mpicc -O2 -Iinclude bench/bench_secagg.c -L"$BUILD" -ldistdpd -ldistdpd_rf -Wl,-rpath,"$PWD/$BUILD" -lsodium -lm \
        -o "$OUT/bench_secagg" 2>"$OUT/bench_secagg.log"; then
        say ""
        say "fed-server refuses --secure in this build, so secure aggregation is measured on its own"
        say "(bench/bench_secagg.c: $NB clients in one process, no transport; d = 10^4 and 10^5 parameters):"
        say ""
        say '```'
        "$OUT/bench_secagg" "$NB" 3 2>&1 | tee -a "$MD"
        say '```'
    fi
fi
fi

# ---- (e) a measured data set split into benches ----
DPA=${FB_DPA:-../shared/data/opendpd/DPA_200MHz}
if want e && [ -f "$DPA/spec.json" ]; then
    step "(e) DPA_200MHz split by drive and by time into 4 benches"
    for by in drive time; do
        "$CLI" split --data "$DPA" --by "$by" --parts 4 --out "$OUT/dpa-$by" -q
        FS_N=4 fedsim "$OUT/e-fedavg-$by" --data "$OUT/dpa-$by" --rounds "$ROUNDS" --local-epochs 1
        echo "$(evalnmse "$OUT/e-fedavg-$by" "$DPA")" >"$OUT/e-fedavg-$by.final"
        for k in 0 1 2 3; do
            "$CLI" train-pa --data "$OUT/dpa-$by/bench-0$k" "${M[@]}" --epochs "$ROUNDS" --no-report \
                --out "$OUT/e-own-$by-$k" >"$OUT/e-own-$by-$k.log" 2>&1 || true
            echo "$(evalnmse "$OUT/e-own-$by-$k" "$DPA")" >"$OUT/e-own-$by-$k.final"
        done
    done
    "$CLI" train-pa --data "$DPA" "${M[@]}" --epochs "$ROUNDS" --no-report --out "$OUT/e-all" >"$OUT/e-all.log" 2>&1 || true
    echo "$(evalnmse "$OUT/e-all" "$DPA")" >"$OUT/e-all.final"
    py "$OUT" "$ROUNDS" <<'EOF' | tee -a "$MD"
import json, os, sys
out, rounds = sys.argv[1], sys.argv[2]
rd = lambda p: open(os.path.join(out, p)).read().strip()
print("\n## (e) A measured data set: DPA_200MHz split into 4 benches\n")
print("`distdpd split --by drive|time --parts 4` of DPA_200MHz (23040 / 7680 / 7680 samples); test NMSE (dB, "
      "`distdpd eval` of the last model on DPA_200MHz's whole test split) of FedAvg over the 4 benches (%s rounds, "
      "E = 1), of each bench's own model (%s epochs) and of one model trained on all the data (%s epochs).\n"
      % (rounds, rounds, rounds))
print("| split | FedAvg, 4 benches | bench-00 alone | bench-01 alone | bench-02 alone | bench-03 alone | all data, one model |")
print("|---|---:|---:|---:|---:|---:|---:|")
for by in ("drive", "time"):
    print("| --by %s | %s | %s | %s |" % (by, rd("e-fedavg-%s.final" % by),
          " | ".join(rd("e-own-%s-%d.final" % (by, k)) for k in range(4)), rd("e-all.final")))
EOF
fi
say ""
say "- load average at the end: $(load); total $(($(date +%s) - T0)) s"
step "done: $MD"
