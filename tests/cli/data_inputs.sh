#!/bin/bash
# Hostile data inputs that must fail fast, in bounded memory, with a message that names
# the file and says what is wrong: a 2 GB sparse CSV (NULs after a valid header), a FIFO
# and /dev/zero as CSV or spec.json, binary files given to distdpd metrics (the message
# must not echo raw bytes). Each run is limited in address space (ulimit -v, not under
# ASan) and time (timeout), and its peak RSS is measured with /usr/bin/time when that is
# installed.
set -euo pipefail
source "$(dirname "$0")/common.bash"

ASAN=0
if grep -q libasan <<<"$(ldd "$DD_CLI" 2>/dev/null)"; then ASAN=1; fi
HAVE_TIME=0
if [ -x /usr/bin/time ]; then HAVE_TIME=1; else echo "note: /usr/bin/time not installed: peak RSS not checked"; fi

# bounded KB SECONDS ARGS...: runs distdpd ARGS with at most KB KiB of address space and
# SECONDS of wall time; sets RC, OUT, ERR, SECS and RSS_KB (peak RSS, empty if unknown).
bounded() {
    local kb=$1 secs=$2
    shift 2
    local t0 t1
    t0=$(date +%s%N)
    set +e
    (
        if [ "$ASAN" -eq 0 ]; then ulimit -v "$kb"; fi
        if [ "$HAVE_TIME" -eq 1 ]; then
            exec timeout -k 2 "$secs" /usr/bin/time -f "%M" -o "$TMP/.rss" "$DD_CLI" "$@"
        else
            exec timeout -k 2 "$secs" "$DD_CLI" "$@"
        fi
    ) >"$TMP/.out" 2>"$TMP/.err" </dev/null
    RC=$?
    set -e
    t1=$(date +%s%N)
    SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
    OUT=$(cat "$TMP/.out")
    ERR=$(cat "$TMP/.err")
    RSS_KB=""
    if [ "$HAVE_TIME" -eq 1 ] && [ -s "$TMP/.rss" ]; then RSS_KB=$(tail -n 1 "$TMP/.rss" | tr -dc '0-9'); fi
    echo "  distdpd $*: exit $RC, ${SECS} s, peak RSS ${RSS_KB:-?} KiB: $(head -n 1 <<<"$ERR" | cut -c1-200)"
}

# fast_small DESC MAX_SECS MAX_KB: the last bounded run took at most MAX_SECS and MAX_KB
fast_small() {
    if awk -v s="$SECS" -v m="$2" 'BEGIN { exit !(s <= m) }'; then pass; else fail "$1: took $SECS s (limit $2 s)"; fi
    if [ -n "$RSS_KB" ]; then
        if [ "$RSS_KB" -le "$3" ]; then pass; else fail "$1: peak RSS $RSS_KB KiB (limit $3 KiB)"; fi
    fi
}

printf '{"input_signal_fs": 800e6, "bw_main_ch": 200e6, "bw_sub_ch": 20e6, "n_sub_ch": 10, "nperseg": 2560}\n' >"$TMP/spec.json"
SPEC="$TMP/spec.json"

# a valid header, then 2 GB of NULs (sparse: takes no disk)
printf 'I,Q\n' >"$TMP/sparse.csv"
truncate -s 2G "$TMP/sparse.csv"
bounded 600000 20 metrics --ref "$TMP/sparse.csv" --test "$TMP/sparse.csv" --spec "$SPEC"
expect_rc 1 "2 GB sparse CSV"
has "$ERR" "$TMP/sparse.csv:2: NUL byte in a text file (binary data?)" "sparse CSV: line 2 named"
fast_small "sparse CSV" 2 65536
rm -f "$TMP/sparse.csv"

# a FIFO nobody writes to: refused, not waited on (as a signal and as spec.json)
mkfifo "$TMP/fifo"
bounded 600000 10 metrics --ref "$TMP/fifo" --test "$TMP/fifo" --spec "$SPEC"
expect_rc 1 "FIFO as CSV"
has "$ERR" "cannot read $TMP/fifo: not a regular file (a FIFO)" "FIFO refused"
fast_small "FIFO as CSV" 2 65536
bounded 600000 10 metrics --ref "$TMP/x.csv" --test "$TMP/x.csv" --spec "$TMP/fifo"
expect_rc 1 "FIFO as spec.json"
has "$ERR" "cannot read $TMP/fifo: not a regular file (a FIFO)" "FIFO spec refused"
bounded 600000 10 inspect "$TMP/fifo"
expect_rc 1 "FIFO as a data set"
has "$ERR" "$TMP/fifo" "FIFO data set named"

# /dev/zero: endless, refused before reading
bounded 600000 10 metrics --ref /dev/zero --test /dev/zero --spec "$SPEC"
expect_rc 1 "/dev/zero as CSV"
has "$ERR" "cannot read /dev/zero: not a regular file (a character device)" "/dev/zero refused"
fast_small "/dev/zero" 2 65536

# a symbolic link loop is reported as such, not as "No such file or directory"
ln -s loop "$TMP/loop"
mkdir "$TMP/loopdir"
ln -s spec.json "$TMP/loopdir/spec.json"
bounded 600000 10 inspect "$TMP/loop"
expect_rc 1 "inspect a symlink loop"
has "$ERR" "cannot open $TMP/loop: Too many levels of symbolic links" "symlink loop reason"
bounded 600000 10 inspect "$TMP/loopdir"
expect_rc 1 "inspect a data set whose spec.json is a loop"
has "$ERR" "cannot open $TMP/loopdir/spec.json: Too many levels of symbolic links" "spec.json loop reason"
bounded 600000 10 metrics --ref "$TMP/loop" --test "$TMP/loop" --spec "$SPEC"
expect_rc 1 "metrics on a symlink loop"
has "$ERR" "cannot open $TMP/loop: Too many levels of symbolic links" "metrics: symlink loop reason"
if [ "$(id -u)" -ne 0 ]; then
    mkdir -p "$TMP/shut/in"
    chmod 0 "$TMP/shut"
    bounded 600000 10 inspect "$TMP/shut/in"
    expect_rc 1 "inspect inside an unreadable directory"
    has "$ERR" "cannot open $TMP/shut/in: Permission denied" "EACCES reason"
    chmod 755 "$TMP/shut"
else
    echo "skipped: the EACCES case (an unreadable directory) runs only as a non-root user"
fi

# NaN in a binary data set: reported at load with file, split, sample and component,
# not as a diverged training or a zero-energy reference
run simulate --out "$TMP/simb" --samples 8000 --format bin -q
expect_rc 0 "simulate --format bin"
cp "$TMP/simb/data.ddb" "$TMP/nan.ddb"
off=$(od -An -t u8 -j 120 -N 8 "$TMP/nan.ddb" | tr -d ' ')
printf '\000\000\300\177' | dd of="$TMP/nan.ddb" bs=1 seek=$((off + 8 * 1234)) conv=notrunc status=none
bounded 2000000 60 train-pa --data "$TMP/nan.ddb" --epochs 1 --out "$TMP/run-nan"
expect_rc 1 "train-pa on a .ddb holding a NaN"
has "$ERR" "$TMP/nan.ddb: split 'train' input, sample 1234 (I) is NaN" "NaN located"
bounded 2000000 60 inspect "$TMP/nan.ddb"
expect_rc 1 "inspect a .ddb holding a NaN"
has "$ERR" "$TMP/nan.ddb: split 'train' input, sample 1234 (I) is NaN" "inspect: NaN located"

# an absurd nperseg is refused with the field named, before anything is allocated for it
sed 's/"nperseg": 2560/"nperseg": 1e9/' "$SPEC" >"$TMP/np1e9.json"
printf 'I,Q\n0.5,0.25\n-0.25,0.5\n' >"$TMP/tiny.csv"
bounded 600000 20 metrics --ref "$TMP/tiny.csv" --test "$TMP/tiny.csv" --spec "$TMP/np1e9.json"
expect_rc 1 "metrics with nperseg 1e9"
has "$ERR" "$TMP/np1e9.json: field 'nperseg' must be <= 1048576 (2^20 samples per evaluation segment), found 1000000000" "nperseg 1e9 named"
fast_small "metrics with nperseg 1e9" 2 65536
run simulate --out "$TMP/sim" --samples 8000 -q
expect_rc 0 "simulate an OpenDPD data set"
sed -E 's/"nperseg":[[:space:]]*[0-9.e+]+/"nperseg": 3e7/' "$TMP/sim/spec.json" >"$TMP/sim/spec2.json" && mv "$TMP/sim/spec2.json" "$TMP/sim/spec.json"
bounded 2000000 60 train-pa --data "$TMP/sim" --epochs 1 --out "$TMP/run-np"
expect_rc 1 "train-pa with nperseg 3e7"
has "$ERR" "$TMP/sim/spec.json: field 'nperseg' must be <= 1048576" "train-pa: nperseg 3e7 named"
fast_small "train-pa with nperseg 3e7" 5 131072

# binary files: the error quotes their first bytes escaped (\xNN), shortened, never raw
printable() { # the last run's stderr holds only printable ASCII and newlines
    if [ "$(LC_ALL=C tr -d '\n\040-\176' <"$TMP/.err" | wc -c)" -eq 0 ]; then pass; else fail "$1: raw bytes in stderr: $(LC_ALL=C od -c "$TMP/.err" | head -n 4)"; fi
}
LC_ALL=C awk 'BEGIN { for (i = 0; i < 300; i++) printf "%c", 128 + i % 100 }' >"$TMP/high.bin"
printf '\033[2J\033]0;owned\007I,Q\n1,2\n' >"$TMP/ctl.csv"
bounded 600000 10 metrics --ref "$TMP/high.bin" --test "$TMP/high.bin" --spec "$SPEC"
expect_rc 1 "metrics on a binary file"
has "$ERR" "$TMP/high.bin:1: header must be 'I,Q', found '\x80\x81\x82" "binary header quoted escaped"
has "$ERR" "...'" "binary header shortened"
printable "metrics on a binary file"
bounded 600000 10 metrics --ref "$TMP/ctl.csv" --test "$TMP/ctl.csv" --spec "$SPEC"
expect_rc 1 "metrics on a CSV with terminal escapes"
has "$ERR" "found '\x1b[2J\x1b]0;owned\x07I,Q'" "escape sequences quoted escaped"
printable "metrics on a CSV with terminal escapes"
bounded 600000 10 metrics --ref "$TMP/ctl.csv" --test "$TMP/ctl.csv" --spec "$TMP/high.bin"
expect_rc 1 "metrics with a binary spec.json"
has "$ERR" "$TMP/high.bin:1: invalid JSON near '\x80\x81" "binary spec quoted escaped"
printable "metrics with a binary spec.json"

finish
