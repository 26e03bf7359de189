#!/bin/bash
# distdpd metrics on committed fixtures (tests/data/metrics_{nl200,lte20}_{ref,test}.csv
# with tests/data/cli_*_spec.json), --json values checked against the independent
# numpy/scipy numbers of tests/data/metrics_ref.json (tools/make_metric_refs.py) for
# both ACLR definitions and both NMSE modes; the text output carries the same numbers;
# bad inputs give the documented exit status and a message naming the file or option.
set -euo pipefail
source "$(dirname "$0")/common.bash"

TOL=0.002 # dB; the C code works on float32 samples with double accumulation

for case in nl200 lte20; do
    ref=tests/data/metrics_${case}_ref.csv
    tst=tests/data/metrics_${case}_test.csv
    spec=tests/data/cli_${case}_spec.json
    # the committed spec must describe the same signal as the reference file
    near "$(json_num "$(cat "$spec")" input_signal_fs)" "$(ref_num $case spec.fs)" 1 "$case spec fs"
    near "$(json_num "$(cat "$spec")" bw_main_ch)" "$(ref_num $case spec.bw_main)" 1 "$case spec bw_main"
    near "$(json_num "$(cat "$spec")" n_sub_ch)" "$(ref_num $case spec.n_sub)" 0 "$case spec n_sub"
    near "$(json_num "$(cat "$spec")" nperseg)" "$(ref_num $case spec.nperseg)" 0 "$case spec nperseg"
    occ=$(json_num "$(cat "$spec")" bw_occupied)
    near "${occ:-0}" "$(ref_num $case spec.bw_occupied)" 1 "$case spec bw_occupied"

    for aclr in opendpd 3gpp; do
        for nmse in segmented pooled; do
            run metrics --ref "$ref" --test "$tst" --spec "$spec" --json --aclr $aclr --nmse $nmse
            expect_rc 0 "metrics --json $case $aclr $nmse"
            lines=$(wc -l <<<"$OUT")
            if [ "$lines" -eq 1 ] && [[ $OUT == \{*\} ]]; then pass; else fail "--json is not one object on one line: $OUT"; fi
            for k in nmse_db aclr_l_db aclr_r_db aclr_avg_db evm_db; do
                has "$OUT" "\"$k\":" "$case --json has $k"
            done
            nkeys=$(grep -o '"[a-z_]*":' <<<"$OUT" | wc -l)
            if [ "$nkeys" -eq 5 ]; then pass; else fail "--json has $nkeys keys, want 5: $OUT"; fi
            near "$(json_num "$OUT" nmse_db)" "$(ref_num $case nmse_${nmse}_db)" $TOL "$case $nmse NMSE"
            near "$(json_num "$OUT" aclr_l_db)" "$(ref_num $case aclr_${aclr}.left_db)" $TOL "$case $aclr ACLR left"
            near "$(json_num "$OUT" aclr_r_db)" "$(ref_num $case aclr_${aclr}.right_db)" $TOL "$case $aclr ACLR right"
            near "$(json_num "$OUT" aclr_avg_db)" "$(ref_num $case aclr_${aclr}.avg_db)" $TOL "$case $aclr ACLR avg"
            near "$(json_num "$OUT" evm_db)" "$(ref_num $case evm_spectral_db)" $TOL "$case spectral EVM"
        done
    done

    # text output: defaults are segmented NMSE and the OpenDPD ACLR
    run metrics --ref "$ref" --test "$tst" --spec "$spec"
    expect_rc 0 "metrics text $case"
    v=$(sed -n 's/^NMSE (segmented, test vs ref): *\(-\{0,1\}[0-9.]*\) dB$/\1/p' <<<"$OUT")
    near "$v" "$(ref_num $case nmse_segmented_db)" 0.001 "$case text NMSE"
    v=$(sed -n 's/^ACLR (opendpd) average: *\(-\{0,1\}[0-9.]*\) dBc$/\1/p' <<<"$OUT")
    near "$v" "$(ref_num $case aclr_opendpd.avg_db)" 0.001 "$case text ACLR"
    has "$OUT" "($(wc -l <"$ref" | awk '{print $1 - 1}') samples)" "$case text sample count"
done

# a signal against itself: NMSE at the floor, same ACLR as measured on its own
ref=tests/data/metrics_nl200_ref.csv
run metrics --ref "$ref" --test "$ref" --spec tests/data/cli_nl200_spec.json --json --nmse pooled
expect_rc 0 "metrics self"
near "$(json_num "$OUT" nmse_db)" -400 0.001 "self NMSE is the -400 dB floor"

# ---- bad inputs
spec=tests/data/cli_nl200_spec.json
tst=tests/data/metrics_nl200_test.csv
run metrics --ref "$TMP/missing.csv" --test "$tst" --spec "$spec"
expect_rc 1 "missing reference file"
has "$ERR" "$TMP/missing.csv" "missing file named"
has "$ERR" "distdpd metrics: error:" "runtime error prefix"

run metrics --ref "$ref" --test "$tst" --spec tests/data/cli_bad_spec.json
expect_rc 1 "malformed spec"
has "$ERR" "tests/data/cli_bad_spec.json" "malformed spec named"

printf '{"input_signal_fs": 800e6, "bw_main_ch": 200e6, "n_sub_ch": 10, "nperseg": 2560}\n' >"$TMP/nosub.json"
run metrics --ref "$ref" --test "$tst" --spec "$TMP/nosub.json"
expect_rc 1 "spec without bw_sub_ch"
has "$ERR" "bw_sub_ch" "missing spec field named"

head -n 1001 "$tst" >"$TMP/short.csv"
run metrics --ref "$ref" --test "$TMP/short.csv" --spec "$spec" --json
expect_rc 1 "length mismatch"
has "$ERR" "$ref has 5820 samples" "mismatch names the reference and its length"
has "$ERR" "$TMP/short.csv has 1000" "mismatch names the test file and its length"
if [ -z "$OUT" ]; then pass; else fail "no JSON on error, got $OUT"; fi

{ head -n 3 "$tst"; echo "0.5,abc"; tail -n +5 "$tst"; } >"$TMP/badcell.csv"
run metrics --ref "$ref" --test "$TMP/badcell.csv" --spec "$spec"
expect_rc 1 "non-numeric cell"
has "$ERR" "$TMP/badcell.csv:4" "bad cell named with file and line"

run metrics --ref "$ref" --test "$tst" --spec "$spec" --frobnicate
expect_rc 2 "unknown option"
has "$ERR" "distdpd metrics: unknown option '--frobnicate'" "unknown option message"
has "$ERR" "Try 'distdpd metrics --help'." "usage hint"

run metrics --ref "$ref" --test "$tst" --spec "$spec" --aclr acpr
expect_rc 2 "bad --aclr value"
has "$ERR" "distdpd metrics: --aclr: expected one of opendpd, 3gpp; got 'acpr'" "bad --aclr message"

run metrics --ref "$ref" --test "$tst" --spec "$spec" --nmse average
expect_rc 2 "bad --nmse value"
has "$ERR" "--nmse: expected one of segmented, pooled; got 'average'" "bad --nmse message"

run metrics --ref "$ref" --spec "$spec"
expect_rc 2 "missing --test"
has "$ERR" "missing --test" "missing --test message"

run metrics --ref "$ref" --test "$tst" --spec
expect_rc 2 "--spec without a value"
has "$ERR" "option '--spec' needs a value" "missing value message"

run metrics --ref "$ref" --test "$tst" --spec "$spec" extra
expect_rc 2 "stray argument"
has "$ERR" "unexpected argument 'extra'" "stray argument message"


# ---- --gain: TEST = g REF with g = 2 + 1i exactly (awk, 9 digits)
ref=tests/data/metrics_nl200_ref.csv
spec=tests/data/cli_nl200_spec.json
awk -F, 'NR == 1 { print; next } { printf "%.9g,%.9g\n", 2 * $1 - $2, $1 + 2 * $2 }' "$ref" >"$TMP/gx.csv"
run metrics --ref "$ref" --test "$TMP/gx.csv" --spec "$spec" --json --nmse pooled
near "$(json_num "$OUT" nmse_db)" 3.0103 0.001 "no gain: NMSE = 20 log10|g - 1| = 3.01 dB"
run metrics --ref "$ref" --test "$TMP/gx.csv" --spec "$spec" --json --nmse pooled --gain auto
expect_rc 0 "--gain auto"
near "$(json_num "$OUT" gain_re)" 2 1e-6 "least-squares gain, real part"
near "$(json_num "$OUT" gain_im)" 1 1e-6 "least-squares gain, imaginary part"
near "$(json_num "$OUT" gain_db)" 6.9897 1e-4 "gain in dB = 20 log10 sqrt(5)"
n=$(json_num "$OUT" nmse_db)
if awk -v v="$n" 'BEGIN { exit !(v < -120) }'; then pass; else fail "--gain auto: NMSE $n dB, want < -120 (float rounding only)"; fi
# a real gain |g| (linear, and in dB) leaves the phase atan(1/2): |e^{j0.4636} - 1|^2 = 2 - 4/sqrt(5) = -6.754 dB
for g in 2.2360679775 6.98970004dB; do
    run metrics --ref "$ref" --test "$TMP/gx.csv" --spec "$spec" --json --nmse pooled --gain $g
    expect_rc 0 "--gain $g"
    near "$(json_num "$OUT" nmse_db)" -6.7542 0.001 "--gain $g: NMSE of the remaining phase"
    near "$(json_num "$OUT" gain_im)" 0 0 "--gain $g: a real gain"
done
run metrics --ref "$ref" --test "$TMP/gx.csv" --spec "$spec" --gain auto
has "$OUT" "gain:      least-squares 2" "text output names the gain"
for g in 0 -3 abc 3dBm; do
    run metrics --ref "$ref" --test "$TMP/gx.csv" --spec "$spec" --gain "$g"
    expect_rc 2 "--gain $g"
    has "$ERR" "--gain '$g'" "--gain $g: the option named"
done

finish
