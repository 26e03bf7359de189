#!/bin/bash
# distdpd demo: writes a self-contained report.html (three SVG plots, no scripts, no
# network, no NaN), summary.json with the measured numbers in the ranges the domain
# notes calibrate the realistic PA to, and a data set that `report` and `inspect` read
# back to the same numbers.
set -euo pipefail
source "$(dirname "$0")/common.bash"

D=$TMP/demo
run demo --out "$D"
expect_rc 0 "demo"
has "$OUT" "report:  $D/report.html" "demo says where the report is"
has "$ERR" "simulating" "progress lines on stderr"
for f in report.html summary.json data/spec.json data/simulation.json data/train_input.csv; do
    if [ -s "$D/$f" ]; then pass; else fail "demo did not write $f"; fi
done

html=$(cat "$D/report.html")
has "$html" "<svg" "report has SVG"
nsvg=$(grep -o "<svg" <<<"$html" | wc -l)
if [ "$nsvg" -eq 3 ]; then pass; else fail "report has $nsvg plots, want 3 (PSD, AM/AM, AM/PM)"; fi
has "$html" "</html>" "report complete"
hasnot "$html" "<script" "no scripts"
hasnot "$(grep -io 'nan' <<<"$html" || true)" "nan" "no NaN printed"
nhttp=$(grep -o "http" <<<"$html" | wc -l)
nns=$(grep -o "http://www.w3.org/2000/svg" <<<"$html" | wc -l)
if [ "$nhttp" -eq "$nns" ]; then pass; else fail "report refers to the network"; fi
has "$html" "EVM (demodulated, known symbols)" "EVM row (symbols known)"
size=$(wc -c <"$D/report.html")
if [ "$size" -lt 400000 ]; then pass; else fail "report is $size bytes"; fi

# summary.json: the realistic PA is calibrated to look like DPA_200MHz (domain notes:
# gain-only NMSE about -20 dB, ACLR about -30 dBc, band-limited input below -60 dBc)
s=$(tr -d ' \t\n' <"$D/summary.json")
gn=$(json_num "$s" gain_nmse_db)
mp=$(json_num "$s" nmse_test_db)
ain=$(json_num "${s#*\"aclr_opendpd\":\{\"in\":\{}" avg_db)
aout=$(json_num "${s#*\"aclr_opendpd\":*\"out\":\{}" avg_db)
evm=$(json_num "$s" evm_out_pct)
evmin=$(json_num "$s" evm_in_pct)
in_range() {
    if awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v != "" && v >= lo && v <= hi) }'; then pass; else fail "$4 = '$1' not in [$2, $3]"; fi
}
in_range "$gn" -25 -15 "gain-only NMSE (dB)"
in_range "$aout" -40 -25 "output ACLR (dBc)"
in_range "$ain" -400 -60 "input ACLR (dBc)"
in_range "$evm" 1 15 "output EVM (%)"
in_range "$evmin" 0 1 "input EVM (%)"
if awk -v a="$mp" -v b="$gn" 'BEGIN { exit !(a != "" && a < b - 5) }'; then pass; else fail "MP fit ($mp dB) not 5 dB better than gain-only ($gn dB)"; fi
near "$(json_num "$s" samples)" 92160 0 "one frame of samples"

# report --data on the demo's data set gives the same table
run report --data "$D/data" --out "$TMP/r.html"
expect_rc 0 "report --data"
has "$OUT" "report: $TMP/r.html" "report says where it wrote"
r=$(cat "$TMP/r.html")
rows() { grep -o '<tr><td>[A-Z][^<]*</td><td class="num">[^<]*</td><td class="num">[^<]*</td>' <<<"$1"; }
if [ -n "$(rows "$html")" ] && [ "$(rows "$html")" = "$(rows "$r")" ]; then pass; else fail "demo and report tables differ"; fi
# inspect of the same data: the test split's gain NMSE is close to the whole set's
run inspect --json "$D/data"
expect_rc 0 "inspect demo data"
t=$(tr -d ' \t\n' <<<"$OUT")
near "$(json_num "${t#*\"splits\":\{\"train\":\{}" gain_nmse_db)" "$gn" 0.5 "train gain NMSE vs whole data set"

# a second demo over the same directory replaces the files
run demo --out "$D" -q
expect_rc 0 "demo again, quiet"
if [ -z "$ERR" ]; then pass; else fail "-q printed progress: $ERR"; fi
left=$(find "$D" -name '*.tmp*' | wc -l)
if [ "$left" -eq 0 ]; then pass; else fail "$left temporary files left behind"; fi

run demo
expect_rc 2 "demo without --out"
has "$ERR" "missing --out DIR" "demo usage message"
run demo --out "$TMP/x" --samples many
expect_rc 2 "demo --samples many"
has "$ERR" "distdpd demo: --samples: expected a positive integer, got 'many'" "demo --samples message"

finish
