# Shared helpers of the command-line tests (tests/cli/*.sh). Sourced, not run: the
# .bash extension keeps it out of ctest's tests/cli/*.sh glob.
#
#   run ARGS...          runs "$DD_CLI" ARGS, sets RC, OUT (stdout), ERR (stderr)
#   expect_rc N DESC     checks RC == N
#   has TEXT NEEDLE DESC checks that TEXT contains NEEDLE (fixed string)
#   near A B TOL DESC    checks |A - B| <= TOL (numbers as text)
#   json_num TEXT KEY    prints the number of "KEY": in a JSON text (flat or pretty)
#   ref_num CASE PATH    prints a number from tests/data/metrics_ref.json
#   finish               prints "NAME: N passed, M failed" and sets the exit status
#   mpi_setup            skips (77) without mpirun, else sets Open MPI's environment
#   mrun NP ARGS...      mpirun -np NP "$DD_CLI" ARGS, bounded in time (a hang fails)
#   watchdog PID         kills PID after 120 s (a hang fails the test instead of blocking
#                        it); sets WATCHDOG to the watcher's pid (kill it when PID is done)
#   untimed FILE         metrics.jsonl without the keys that differ between equal runs
#                        (times, checkpoint stalls)
#   ev RUN               eval --json of RUN's last checkpoint without run-specific keys
#   same_metrics A B DESC   every metric of two ev outputs within 0.01 dB, val loss 1e-5
#   small_sim            simulates the training tests' data set (12,000 samples, Wiener-
#                        Hammerstein PA) into D=$TMP/sim and sets SMALL, their small GRU recipe
#   need_python MOD...   sets PY=/usr/bin/python3, or skips (77) naming the Debian packages
#                        (python3-MOD) when it cannot import every MOD

: "${DD_CLI:?set DD_CLI to the distdpd command (ctest does)}"
cd "${DD_SOURCE_DIR:-$(dirname "${BASH_SOURCE[0]}")/../..}"

T_NAME=${T_NAME:-cli_$(basename "$0" .sh)}
T_PASS=0
T_FAIL=0
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ddcli.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

pass() { T_PASS=$((T_PASS + 1)); }
fail() {
    T_FAIL=$((T_FAIL + 1))
    echo "FAIL: $*" >&2
}

run() {
    set +e
    "$DD_CLI" "$@" >"$TMP/.out" 2>"$TMP/.err"
    RC=$?
    set -e
    OUT=$(cat "$TMP/.out")
    ERR=$(cat "$TMP/.err")
    # under AddressSanitizer a leak or memory error on an error path would otherwise
    # hide behind the expected non-zero exit status
    if grep -q "Sanitizer" <<<"$ERR"; then fail "sanitizer report from distdpd $*: $(head -c 2000 <<<"$ERR")"; fi
}

expect_rc() {
    if [ "$RC" -eq "$1" ]; then pass; else fail "$2: exit status $RC, want $1; stderr: $ERR"; fi
}

has() {
    if grep -qF -- "$2" <<<"$1"; then pass; else fail "$3: output lacks '$2'; got: $(head -c 600 <<<"$1")"; fi
}

hasnot() {
    if grep -qF -- "$2" <<<"$1"; then fail "$3: output contains '$2'"; else pass; fi
}

near() {
    if [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }'; then
        pass
    else
        fail "$4: '$1' vs '$2' (tolerance $3)"
    fi
}

# "KEY": NUMBER anywhere in the text (first occurrence).
json_num() {
    tr -d '\n\t ' <<<"$1" | { grep -o "\"$2\":-\{0,1\}[0-9][0-9.eE+-]*" || true; } | head -n 1 | sed 's/^[^:]*://'
}

# A number from the metrics reference file (written by tools/make_metric_refs.py):
# CASE = nl200 | lte20 | dataset; PATH = key or section.key (e.g. aclr_3gpp.left_db).
ref_num() {
    awk -v want_case="$1" -v want="$2" '
        /^ *"name": *"/ { c = $0; sub(/.*"name": *"/, "", c); sub(/".*/, "", c); cur = c; sec = ""; next }
        /^ "dataset": *\{/ { cur = "dataset"; sec = ""; next }
        cur != want_case { next }
        /^ *"[A-Za-z0-9_]+": *\{/ { s = $0; sub(/^ *"/, "", s); sub(/".*/, "", s); sec = s; next }
        /^ *\}/ { sec = ""; next }
        /^ *"[A-Za-z0-9_]+": *-?[0-9]/ {
            k = $0; sub(/^ *"/, "", k); sub(/".*/, "", k)
            v = $0; sub(/^[^:]*: */, "", v); sub(/,$/, "", v)
            if ((sec == "" ? k : sec "." k) == want) { print v; exit }
        }' tests/data/metrics_ref.json
}

mpi_setup() {
    if ! command -v mpirun >/dev/null 2>&1; then
        echo "SKIP: mpirun not found"
        exit 77
    fi
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    export OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1
}

# mpirun -np N distdpd ARGS (bounded in time: a hang fails the test instead of blocking it)
mrun() {
    local np=$1
    shift
    set +e
    timeout 120 mpirun -np "$np" "$DD_CLI" "$@" >"$TMP/.out" 2>"$TMP/.err"
    RC=$?
    set -e
    OUT=$(cat "$TMP/.out")
    ERR=$(cat "$TMP/.err")
    if [ "$RC" -eq 124 ]; then fail "mpirun -np $np distdpd $*: timed out (hang)"; fi
}

# kill PID after 120 s; the watcher exits as soon as PID is gone and holds none of the
# test's output pipes
watchdog() {
    local pid=$1
    (
        for _ in $(seq 1 600); do
            kill -0 "$pid" 2>/dev/null || exit 0
            sleep 0.2
        done
        kill -KILL "$pid"
    ) >/dev/null 2>&1 &
    WATCHDOG=$!
}

# metrics.jsonl without the timing keys (and the checkpoint stall and write times)
# A free loopback TCP port (bound to port 0, read, released) for a server started by a
# test; never one this script was given before ($TMP/.ports: the kernel can hand out the
# same free port twice in a row, and callers run in $(...) subshells).
free_port() {
    local p
    for _ in $(seq 1 50); do
        p=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
        grep -qx "$p" "$TMP/.ports" 2>/dev/null || break
    done
    echo "$p" >>"$TMP/.ports"
    echo "$p"
}
untimed() { sed 's/"time_s":[^,]*,//; s/"eval_time_s":[^,]*,//; s/,"compress_time_s":[^,}]*//; s/,"ckpt_[a-z_]*":[^,}]*//g' "$1"; }

# eval --json of a run's last checkpoint without the fields that differ between runs
ev() {
    run eval --run "$1" --ckpt last --json
    sed 's/,"eval_time_s":[^,}]*//; s/"run":"[^"]*",//' <<<"$OUT"
}

same_metrics() { # A B DESC: every metric within 0.01 dB, the validation loss within 1e-5
    for k in val_nmse_db test_nmse_db val_aclr_avg_db test_evm_db; do
        near "$(json_num "$1" "$k")" "$(json_num "$2" "$k")" 0.01 "$3: $k"
    done
    local la lb
    la=$(json_num "$1" val_loss)
    lb=$(json_num "$2" val_loss)
    near "$la" "$lb" "$(awk -v a="$la" 'BEGIN { print (a < 0 ? -a : a) * 1e-5 }')" "$3: val_loss (rel. 1e-5)"
}

small_sim() {
    D=$TMP/sim
    run simulate --out "$D" --samples 12000 --pa wiener-hammerstein -q
    expect_rc 0 "simulate"
    SMALL=(--model gru --hidden 6 --frame 32 --stride 4 --batch 32 --lr 2e-2)
}

need_python() {
    PY=/usr/bin/python3
    if ! [ -x "$PY" ] || ! "$PY" -c "import $(IFS=,; echo "$*")" 2>/dev/null; then
        echo "SKIP: $PY with $* not found (apt-get install$(printf ' python3-%s' "$@"))"
        exit 77
    fi
}

finish() {
    echo "$T_NAME: $T_PASS passed, $T_FAIL failed"
    [ "$T_FAIL" -eq 0 ]
}
