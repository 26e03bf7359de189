#!/bin/bash
# distdpd convert on a simulated data set: OpenDPD directory -> binary -> SigMF -> single
# data.csv -> binary gives a byte-identical binary file (samples bit-exact, spec carried),
# the format chosen from OUT's name, --split ratios (exact counts, reported), the spec's
# fields kept, and the errors with their exit statuses (usage 2: bad --to, bad --split,
# missing OUT; runtime 1: missing source named, a bad CSV line named with file:line, OUT
# being the source). The library test (test_convert) covers every pair of layouts.
set -euo pipefail
source "$(dirname "$0")/common.bash"

run simulate --out "$TMP/sim" --samples 12000 -q
expect_rc 0 simulate
run convert "$TMP/sim" "$TMP/a.ddb"
expect_rc 0 "csv-dir -> bin (format from .ddb)"
has "$OUT" "(csv-dir) -> $TMP/a.ddb (bin): 12000 samples (train 7200, val 2400, test 2400" "summary line"
run convert "$TMP/a.ddb" "$TMP/s/rec_input.sigmf-meta"
expect_rc 0 "bin -> sigmf (format from .sigmf-meta)"
[ -s "$TMP/s/rec_output.sigmf-data" ] && pass || fail "sigmf pair written under the prefix"
run convert "$TMP/s/rec" "$TMP/single" --to csv
expect_rc 0 "sigmf -> csv"
has "$(head -n 1 "$TMP/single/data.csv")" "I_in,Q_in,I_out,Q_out" "data.csv header"
has "$(cat "$TMP/single/spec.json")" '"single_csv"' "spec.json of a single file"
run convert "$TMP/single" "$TMP/dir2"
expect_rc 0 "csv -> csv-dir (the default)"
run convert "$TMP/dir2" "$TMP/b.ddb" --chunk 1000
expect_rc 0 "csv-dir -> bin"
cmp -s "$TMP/a.ddb" "$TMP/b.ddb" && pass || fail "the round trip through every layout changed the binary file"
for k in input_signal_fs bw_main_ch bw_sub_ch n_sub_ch nperseg bw_occupied; do
    near "$(json_num "$(cat "$TMP/dir2/spec.json")" $k)" "$(json_num "$(cat "$TMP/sim/spec.json")" $k)" 0 "spec $k carried"
done
run inspect "$TMP/b.ddb" --json
expect_rc 0 "inspect the converted file"

# --split: floor(12000 x 0.7) = 8400, floor(12000 x 0.15) = 1800, the rest 1800
run convert "$TMP/a.ddb" "$TMP/re" --to csv-dir --split 0.7,0.15,0.15
expect_rc 0 "--split"
has "$OUT" "train 8400, val 1800, test 1800; ratios 0.7/0.15/0.15" "--split counts"
n=$(($(wc -l <"$TMP/re/train_input.csv") - 1))
[ "$n" -eq 8400 ] && pass || fail "train_input.csv has $n rows, want 8400"
# the recording is unchanged in time order: train + val + test rows = the original's
cat "$TMP/sim/train_output.csv" <(tail -n +2 "$TMP/sim/val_output.csv") <(tail -n +2 "$TMP/sim/test_output.csv") >"$TMP/all0"
cat "$TMP/re/train_output.csv" <(tail -n +2 "$TMP/re/val_output.csv") <(tail -n +2 "$TMP/re/test_output.csv") >"$TMP/all1"
cmp -s "$TMP/all0" "$TMP/all1" && pass || fail "--split reordered or changed samples"

# errors
run convert "$TMP/a.ddb" "$TMP/x" --to hdf5
expect_rc 2 "--to hdf5"
run convert "$TMP/a.ddb" "$TMP/x" --split 0.5,0.6,0
expect_rc 2 "--split not summing to 1"
has "$ERR" "sum to 1.1" "--split sum named"
run convert "$TMP/a.ddb"
expect_rc 2 "missing OUT"
run convert "$TMP/none" "$TMP/x"
expect_rc 1 "missing source"
has "$ERR" "$TMP/none" "missing source named"
run convert "$TMP/dir2" "$TMP/dir2" --to csv
expect_rc 1 "OUT is the source"
has "$ERR" "is the source" "OUT is the source: message"
sed -i '77s/.*/1.0,abc/' "$TMP/dir2/val_input.csv"
run convert "$TMP/dir2" "$TMP/bad.ddb"
expect_rc 1 "bad CSV cell"
has "$ERR" "val_input.csv:77: column 2 ('Q') is not a number: 'abc'" "bad cell named with file:line"
[ ! -e "$TMP/bad.ddb" ] && pass || fail "a failed conversion left $TMP/bad.ddb"
run convert --help
expect_rc 0 "--help"
has "$OUT" "--split A,B,C" "help lists --split"
finish
