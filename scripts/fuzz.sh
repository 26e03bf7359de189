#!/usr/bin/env bash
# Runs the libFuzzer targets of build-fuzz/ (make fuzz) for SECONDS each, one after the
# other, on the committed seeds tests/fuzz/corpus/<t>/ plus a working corpus
# build-fuzz/corpus/<t>/ (kept between runs; new inputs go there) and the dictionary
# tests/fuzz/<t>.dict when there is one. Prints per target the executions, libFuzzer's
# coverage (cov: edges, ft: features) and the corpus size of its last status line.
# A crash, leak, timeout (-timeout=10 s per input; FUZZ_TIMEOUT=S sets it, for a loaded
# machine, with DD_TEST_TIMEOUT_SCALE for the harnesses' own waits) or sanitizer report fails the run;
# the input is left in build-fuzz/artifacts/ (turn it into tests/fuzz/regress/<t>/).
# Usage: scripts/fuzz.sh SECONDS [TARGET...]   (targets: csv spec_json ... ; default all)
# FUZZ_RUNS=N also stops a target after N executions (the issue's 10 million: a target
# stops at whichever of SECONDS and N comes first).
set -uo pipefail
cd "$(dirname "$0")/.."
SECS=${1:?usage: scripts/fuzz.sh SECONDS [TARGET...]}
shift
B=${FUZZ_BUILD:-build-fuzz}
if [ $# -eq 0 ]; then
  set -- $(cd tests/fuzz && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//')
fi
mkdir -p "$B/artifacts" "$B/logs"
fail=0
printf '%-10s %10s %8s %8s %7s %s\n' target execs cov ft corpus result
for t in "$@"; do
  mkdir -p "$B/corpus/$t"
  dict=()
  runs=()
  [ -n "${FUZZ_RUNS:-}" ] && runs=(-runs="$FUZZ_RUNS")
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  log="$B/logs/$t.log"
  OPENBLAS_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$B/fuzz_$t" -max_total_time="$SECS" -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 -print_final_stats=1 "${runs[@]}" \
    -artifact_prefix="$B/artifacts/$t-" "${dict[@]}" "$B/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}')
  cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
  ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
  corp=$(sed -nE 's/.* corp: ([0-9]+)\/.*/\1/p' <<<"$last")
  res=ok
  if [ $rc -ne 0 ]; then res="FAILED (rc $rc, see $log)"; fail=1; fi
  printf '%-10s %10s %8s %8s %7s %s\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$res"
done
exit $fail
