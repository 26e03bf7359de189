#!/usr/bin/env bash
# valgrind memcheck over a ctest label of an already built tree (make valgrind, and
# `make test` after `make check`; docs/testing.md, "valgrind"):
#   tests/valgrind.sh BUILD [JOBS] [REGEX] [LABEL]
# runs `ctest -T memcheck` in BUILD (the RelWithDebInfo tree `make check` built: nothing is
# rebuilt), every test of LABEL (default unit) matching REGEX through
#   valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
# with the suppressions of tests/valgrind.supp (Open MPI's own reports only). A test fails
# on any memcheck error or definite leak; the valgrind reports of failing tests are
# printed. Left out (VG_EXCLUDE, a ctest -E regex): the *_avx2 repeats (valgrind 3.19
# hides AVX-512 from the program, so under it the default SIMD path already is the AVX2
# one they select). test_train_learn runs its small configuration here, test_nn_gemm_panels
# its small products (DD_TEST_VALGRIND).
# DD_TEST_TIMEOUT_SCALE (default 20) stretches the waits of tests that wait for an event
# with a deadline (dd_test_timeout_scale in tests/dd_test.h); DD_TEST_VALGRIND=1 tells
# the resource probes (tests/probe_test_util.h) that peak RSS means nothing here, and
# test_train_learn to train its small configuration (the full one: over 900 s here).
set -u
build=${1:?usage: tests/valgrind.sh BUILD [JOBS] [REGEX] [LABEL]}
jobs=${2:-2}
regex=${3:-.}
label=${4:-unit}
here=$(cd "$(dirname "$0")" && pwd)
vg=$(command -v valgrind) || { echo "valgrind not found (apt-get install valgrind)" >&2; exit 1; }
opts="--error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --track-origins=yes"
opts="$opts --num-callers=30 --suppressions=$here/valgrind.supp"
export DD_TEST_TIMEOUT_SCALE=${DD_TEST_TIMEOUT_SCALE:-20} DD_TEST_VALGRIND=1
exclude=${VG_EXCLUDE-_avx2\$}
cd "$build" || exit 1
rm -f Testing/Temporary/MemoryChecker.*.log
t0=$(date +%s)
# ctest -T wants a DartConfiguration.tcl (include(CTest)) only for submissions: its
# complaint about the missing file is filtered out
ctest -T memcheck --overwrite "MemoryCheckCommand=$vg" --overwrite "MemoryCheckCommandOptions=$opts" \
  -L "$label" -R "$regex" ${exclude:+-E "$exclude"} -j "$jobs" --output-on-failure 2> >(grep -v 'DartConfiguration.tcl' >&2)
rc=$?
for f in Testing/Temporary/MemoryChecker.*.log; do
  [ -f "$f" ] || continue
  if grep -qE 'ERROR SUMMARY: [1-9]|definitely lost: [1-9]' "$f"; then
    echo "==== $f"
    cat "$f"
  fi
done
echo "valgrind ($label, '$regex'): $(( $(date +%s) - t0 )) s, ctest exit $rc"
exit $rc
