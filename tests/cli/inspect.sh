#!/bin/bash
# distdpd inspect on the measured OpenDPD data set DPA_200MHz (skipped when absent):
# the split sizes and sample rate of its spec/README (23,040 / 7,680 / 7,680 samples,
# 800 MHz, 200 MHz = 10 x 20 MHz), and the test split's output ACLR and gain-only NMSE
# against the independent numpy/scipy values in tests/data/metrics_ref.json.
set -euo pipefail
source "$(dirname "$0")/common.bash"

DPA=../shared/data/opendpd/DPA_200MHz
if [ ! -f "$DPA/spec.json" ]; then
    echo "SKIP: $DPA not found (the OpenDPD DPA_200MHz data set is not installed)"
    exit 77
fi

run inspect "$DPA"
expect_rc 0 "inspect DPA_200MHz"
has "$OUT" "format:       split_csv" "format"
has "$OUT" "samples:      train 23040, val 7680, test 7680 (total 38400)" "split sizes"
has "$OUT" "sample rate:  800 MHz" "sample rate"
has "$OUT" "main channel: 200 MHz = 10 x 20 MHz sub-channels" "channel layout"
has "$OUT" "nperseg:      2560" "nperseg"
# the domain notes quote a gain-only fit NMSE of -19.9 dB for this data set
v=$(awk '$1 == "train" { print $NF }' <<<"$OUT")
near "$v" -19.9 0.1 "train gain-only NMSE (text)"

run inspect --json "$DPA"
expect_rc 0 "inspect --json"
flat=$(tr -d ' \t\n' <<<"$OUT")
has "$flat" '"samples":{"train":23040,"val":7680,"test":7680}' "JSON split sizes"
has "$flat" '"total_samples":38400' "JSON total"
near "$(json_num "$flat" fs_hz)" 800e6 0 "JSON fs"
near "$(json_num "$flat" bw_main_hz)" 200e6 0 "JSON bw_main"
near "$(json_num "$flat" n_sub)" 10 0 "JSON n_sub"
near "$(json_num "$flat" nperseg)" 2560 0 "JSON nperseg"
test_split=${flat#*\"test\":\{}
out_aclr=${test_split#*\"aclr_out_db\":\{}
near "$(json_num "$out_aclr" left)" "$(ref_num dataset aclr_opendpd.left_db)" 0.002 "test split output ACLR left"
near "$(json_num "$out_aclr" right)" "$(ref_num dataset aclr_opendpd.right_db)" 0.002 "test split output ACLR right"
near "$(json_num "$out_aclr" avg)" "$(ref_num dataset aclr_opendpd.avg_db)" 0.002 "test split output ACLR avg"
near "$(json_num "$test_split" gain_nmse_db)" "$(ref_num dataset nmse_gain_pooled_db)" 0.002 "test split gain-only NMSE"
g=${test_split#*\"gain\":\[}
near "${g%%,*}" "$(ref_num dataset gain_re)" 0.001 "test split gain (real part)"

# `metrics` of the test split against itself reports the same output ACLR
run metrics --ref "$DPA/test_output.csv" --test "$DPA/test_output.csv" --spec "$DPA/spec.json" --json
expect_rc 0 "metrics on the DPA test split"
near "$(json_num "$OUT" aclr_avg_db)" "$(ref_num dataset aclr_opendpd.avg_db)" 0.002 "metrics ACLR = inspect ACLR"

finish
