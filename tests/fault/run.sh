#!/usr/bin/env bash
# Fault-injection scenarios (SQLite style; docs/testing.md): each scenario is run with
# the N-th allocation failing (DD_FAULT_ALLOC=N), for N = 1, 2, ... until a run passes
# the scenario's last allocation, then likewise with the N-th file write / fopen for
# writing / fclose / fsync / rename failing (DD_FAULT_IO=N). Built by `make fault`
# (build-fault/: ASan + UBSan + tests/fault/fault.h). Every run must
#   - end cleanly: exit 0, or exit 1 with one "distdpd CMD: error: ... (DD_ERR_NOMEM)"
#     (allocation) or "(DD_ERR_IO)" (I/O) line, never a signal;
#   - leave no sanitizer report (LeakSanitizer included);
#   - leave the run directory valid: last.ckpt and best.ckpt verify (distdpd inspect of
#     the ordinary build), config.json and every metrics.jsonl line parse as JSON.
# Scenarios: resume (load the data set, load last.ckpt, train an epoch, save checkpoints,
# rewrite config.json/metrics, write report.html) and fresh (a new run directory:
# the same from scratch), both of the gmp model on a small simulated data set.
# Usage: tests/fault/run.sh FAULT_BUILD REF_BUILD [MAX_N [FROM_N [SCENARIOS [KINDS]]]]
#   MAX_N: stop there (0 = no cap); FROM_N: start there (default 1); SCENARIOS: "resume
#   fresh" (default); KINDS: "ALLOC IO" (default).
set -uo pipefail
FB=${1:?usage: run.sh FAULT_BUILD REF_BUILD [MAX_N]}
RB=${2:?usage: run.sh FAULT_BUILD REF_BUILD [MAX_N]}
MAXN=${3:-0}
FROM=${4:-1}
SCENS=${5:-resume fresh}
KINDS=${6:-ALLOC IO}
FAULT="$(cd "$FB" && pwd)/distdpd"
REF="$(cd "$RB" && pwd)/distdpd"
T=$(mktemp -d /tmp/ddfault.XXXXXX)
trap 'rm -rf "$T"' EXIT
export OPENBLAS_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=1:exitcode=99 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
"$REF" simulate --out "$T/data" --samples 3000 >/dev/null || exit 1
TRAIN=(--model gmp --memory 2 --order 2 --frame 50 --batch 16)
"$REF" train-pa --data "$T/data" "${TRAIN[@]}" --epochs 1 --out "$T/base" >/dev/null 2>&1 || exit 1

PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3 # not a version-manager shim: one start per N
valid_run() { # DIR: the run's files are whole
  local d=$1 f
  for f in last.ckpt best.ckpt; do
    [ -f "$d/$f" ] || continue
    "$REF" inspect "$d/$f" >/dev/null 2>"$T/inspect.err" ||
      { echo "$f does not verify: $(tail -1 "$T/inspect.err")"; mkdir -p fault-failures; cp -a "$d" "fault-failures/torn-$$-$RANDOM"; return 1; }
  done
  "$PY" - "$d" <<'PYEOF' || return 1
import json, os, sys
d = sys.argv[1]
try:
    if os.path.exists(d + "/config.json"):
        json.load(open(d + "/config.json"))
except ValueError:
    print("config.json torn"); sys.exit(1)
try:
    if os.path.exists(d + "/metrics.jsonl"):
        [json.loads(l) for l in open(d + "/metrics.jsonl")]
except ValueError:
    print("metrics.jsonl torn"); sys.exit(1)
PYEOF
  return 0
}

fail=0
summary=()
for scen in $SCENS; do
  for kind in $KINDS; do
    code=DD_ERR_NOMEM
    [ $kind = IO ] && code=DD_ERR_IO
    n=$((FROM - 1)) points=0 clean_ok=0 errs=0
    while :; do
      n=$((n + 1))
      rm -rf "$T/run"
      if [ $scen = resume ]; then
        cp -a "$T/base" "$T/run"
        args=(train-pa --resume "$T/run" --epochs 2)
      else
        args=(train-pa --data "$T/data" "${TRAIN[@]}" --epochs 1 --out "$T/run")
      fi
      env "DD_FAULT_$kind=$n" DD_FAULT_REPORT="$T/rep" "$FAULT" "${args[@]}" >"$T/out" 2>"$T/err"
      rc=$?
      fired=$(awk '{print $3}' "$T/rep" 2>/dev/null)
      bad=""
      if grep -qE 'Sanitizer|runtime error' "$T/err"; then bad="sanitizer report"
      elif [ $rc -ne 0 ] && [ $rc -ne 1 ]; then bad="exit $rc"
      elif [ $rc -eq 1 ] && ! grep -qE "error: .*\\($code\\)" "$T/err"; then bad="exit 1 without a $code error line"
      fi
      if [ -z "$bad" ] && [ $scen = resume ] || [ -d "$T/run" ]; then
        why=$(valid_run "$T/run") || bad="${bad:+$bad; }$why"
      fi
      if [ -n "$bad" ]; then
        fail=1
        errs=$((errs + 1))
        echo "FAIL $scen DD_FAULT_$kind=$n: $bad"
        grep -E 'error|Sanitizer|SUMMARY|runtime error' "$T/err" | head -5 | sed 's/^/    /'
        mkdir -p fault-failures
        cp "$T/err" "fault-failures/$scen-$kind-$n.err"
      fi
      [ "$fired" = 1 ] || break # N passed the last call: the scenario completed
      points=$((points + 1))
      [ $rc -eq 0 ] && clean_ok=$((clean_ok + 1))
      [ "$MAXN" -gt 0 ] && [ $n -ge "$MAXN" ] && break
    done
    summary+=("$(printf '%-7s %-5s %6d failure points, %4d of them tolerated (exit 0), %d defects' "$scen" "$kind" "$points" "$clean_ok" "$errs")")
  done
done
printf '%s\n' "${summary[@]}"
exit $fail
