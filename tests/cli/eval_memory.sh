#!/bin/bash
# Evaluation memory grows with the data, not with nperseg x eval_batch: `distdpd eval` of
# one GRU run on simulated binary data sets (nperseg 32768) of 0.4 M and 2 M samples. Peak
# RSS (/usr/bin/time) may grow by at most 1.2 bytes per byte of data set between them
# (measured 0.8: the mapped validation and test samples the evaluation reads, and their
# padded reference and prediction copies). Before the evaluation workspace was bounded
# it grew 6 bytes per byte (eval_batch x 32768 columns of model workspace: 235 MB at
# 2 M samples). That the numbers do not change is tests/test_train.c's (eval caps).
set -euo pipefail
source "$(dirname "$0")/common.bash"

if [ ! -x /usr/bin/time ]; then
    echo "skipped: /usr/bin/time not installed (apt-get install time)"
    exit 77
fi
if grep -q libasan <<<"$(ldd "$DD_CLI" 2>/dev/null)"; then
    echo "skipped: peak RSS is not the program's own under AddressSanitizer"
    exit 77
fi

rss_kb=()
bytes=()
for n in 400000 2000000; do
    run simulate --out "$TMP/sim_$n" --signal 10x20 --samples $n --format bin -q
    expect_rc 0 "simulate $n samples (binary)"
    bytes+=("$(stat -c %s "$TMP/sim_$n/data.ddb")")
done
run train-pa --data "$TMP/sim_400000/data.ddb" --model gru --hidden 23 --epochs 1 --stride 1000 --out "$TMP/run" \
    --progress none --no-report -q
expect_rc 0 "train-pa on 0.4 M samples"
for n in 400000 2000000; do
    set +e
    /usr/bin/time -f "%M" -o "$TMP/.rss" "$DD_CLI" eval --run "$TMP/run" --data "$TMP/sim_$n/data.ddb" --json \
        >"$TMP/eval_$n.json" 2>"$TMP/.err"
    RC=$?
    set -e
    ERR=$(cat "$TMP/.err")
    expect_rc 0 "eval on $n samples"
    rss_kb+=("$(tail -n 1 "$TMP/.rss")")
    has "$(cat "$TMP/eval_$n.json")" '"val_nmse_db":' "eval --json on $n samples"
done
slope=$(awk -v r0="${rss_kb[0]}" -v r1="${rss_kb[1]}" -v d0="${bytes[0]}" -v d1="${bytes[1]}" \
    'BEGIN { printf "%.3f", (r1 - r0) * 1024 / (d1 - d0) }')
echo "peak RSS ${rss_kb[0]} KiB at ${bytes[0]} bytes of data, ${rss_kb[1]} KiB at ${bytes[1]}: $slope bytes per byte"
awk -v s="$slope" 'BEGIN { exit !(s <= 1.2) }' && pass || fail "peak RSS grows $slope bytes per byte of data (limit 1.2)"
# and the fixed part stays small: 0.4 M samples (6.4 MB) evaluate in under 64 MB
[ "${rss_kb[0]}" -lt 65536 ] && pass || fail "peak RSS at 0.4 M samples: ${rss_kb[0]} KiB (limit 64 MiB)"

finish
