#!/bin/bash
# distdpd demo --quick: the whole loop (simulate, train a PA model, train a DPD, measure
# the DPD on the true PA). Checks: the files (data set with pa.json, both run
# directories, report.html, summary.json); a self-contained report with the eight plots
# (learning curves, spectra and AM/AM-AM/PM without and with DPD, the campaign's three)
# and no NaN; summary.json keys and their consistency with the run directories; the DPD
# improves the true PA's ACLR (OpenDPD, average, test split) by at least 6 dB even with
# --quick's short training (measured 9-10 dB; the full demo's >= 15 dB is checked by
# hand, see docs/cli.md) and lowers its EVM; the campaign's numbers in the ranges the
# realistic PA is calibrated to; `report` on the demo's data set reproduces its tables.
set -euo pipefail
source "$(dirname "$0")/common.bash"

D=$TMP/demo
run demo --out "$D" --quick
expect_rc 0 "demo --quick"
has "$OUT" "report:  $D/report.html" "demo says where the report is"
has "$OUT" "true PA, test split" "demo prints the true-PA results"
has "$ERR" "simulating" "progress lines on stderr"
has "$ERR" "PA model epoch 1/" "PA training progress"
has "$ERR" "DPD epoch 1/" "DPD training progress"
for f in report.html summary.json data/spec.json data/simulation.json data/pa.json data/train_input.csv \
    run-pa/config.json run-pa/metrics.jsonl run-pa/history.csv run-pa/best.ckpt run-pa/report.html \
    run-dpd/config.json run-dpd/metrics.jsonl run-dpd/best.ckpt run-dpd/last.ckpt run-dpd/report.html; do
    if [ -s "$D/$f" ]; then pass; else fail "demo did not write $f"; fi
done

html=$(cat "$D/report.html")
nsvg=$(grep -o "<svg" <<<"$html" | wc -l)
if [ "$nsvg" -eq 8 ]; then pass; else fail "report has $nsvg plots, want 8 (2 learning curves, PSD, AM/AM, AM/PM with/without DPD; campaign PSD, AM/AM, AM/PM)"; fi
for h in "DPD on the true PA" "Learning curves" "Spectrum of the true PA without and with DPD" \
    "AM/AM and AM/PM of the true PA without and with DPD" "The simulated campaign" "Definitions" \
    "true PA output, with DPD" "PA model with DPD" "validation NMSE"; do
    has "$html" "$h" "report has '$h'"
done
has "$html" "</html>" "report complete"
hasnot "$html" "<script" "no scripts"
hasnot "$(grep -io 'nan' <<<"$html" || true)" "nan" "no NaN printed"
hasnot "$html" "n/a" "every number of the report measured"
nhttp=$(grep -o "http" <<<"$html" | wc -l)
nns=$(grep -o "http://www.w3.org/2000/svg" <<<"$html" | wc -l)
if [ "$nhttp" -eq "$nns" ]; then pass; else fail "report refers to the network"; fi
has "$html" "EVM (demodulated, known symbols)" "EVM row (symbols known)"
size=$(wc -c <"$D/report.html")
if [ "$size" -lt 600000 ]; then pass; else fail "report is $size bytes"; fi

in_range() {
    if awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v != "" && v >= lo && v <= hi) }'; then pass; else fail "$4 = '$1' not in [$2, $3]"; fi
}
s=$(tr -d ' \t\n' <"$D/summary.json")

# ---- the DPD on the true PA
a0=$(json_num "$s" aclr_no_dpd_db)
a1=$(json_num "$s" aclr_dpd_db)
ai=$(json_num "$s" aclr_improvement_db)
g0=$(json_num "$s" aclr_3gpp_no_dpd_db)
g1=$(json_num "$s" aclr_3gpp_dpd_db)
e0=$(json_num "$s" evm_no_dpd_pct)
e1=$(json_num "$s" evm_dpd_pct)
pn=$(json_num "$s" pa_model_test_nmse_db)
tt=$(json_num "$s" total_s)
for k in aclr_no_dpd_db aclr_dpd_db aclr_improvement_db evm_no_dpd_pct evm_dpd_pct pa_model_test_nmse_db \
    simulate_s train_pa_s train_dpd_s evaluate_s total_s; do
    if [ -n "$(json_num "$s" $k)" ]; then pass; else fail "summary.json lacks a number '$k'"; fi
done
in_range "$a0" -38 -28 "true PA ACLR without DPD (dBc)"
near "$(awk -v a="$a0" -v b="$a1" 'BEGIN { printf "%.9f", a - b }')" "$ai" 1e-6 "aclr_improvement_db = no DPD - DPD"
in_range "$ai" 6 60 "ACLR improvement by the --quick DPD (dB)"
in_range "$(awk -v a="$g0" -v b="$g1" 'BEGIN { print a - b }')" 3 60 "3GPP ACLR improvement (dB)"
if awk -v a="$e0" -v b="$e1" 'BEGIN { exit !(a != "" && b != "" && b < 0.8 * a) }'; then pass; else fail "EVM with DPD ($e1 %) not clearly below without ($e0 %)"; fi
in_range "$pn" -60 -24 "PA model test NMSE (dB)"
in_range "$tt" 0 120 "total time (s)"
# the same numbers as the library's run directories
c=$(tr -d ' \t\n' <"$D/run-dpd/config.json")
near "$(json_num "${c#*\"no_dpd_test\":\{}" aclr_avg_db)" "$a0" 0.005 "no-DPD ACLR = run-dpd/config.json true_pa.no_dpd_test"
best=$(grep '"best":true' "$D/run-dpd/metrics.jsonl" | tail -n 1 | tr -d ' ')
near "$(json_num "$best" true_test_aclr_avg_db)" "$a1" 0.005 "DPD ACLR = the best epoch's true_test_aclr_avg_db"
bestpa=$(grep '"best":true' "$D/run-pa/metrics.jsonl" | tail -n 1 | tr -d ' ')
near "$(json_num "$bestpa" test_nmse_db)" "$pn" 0.005 "PA model NMSE = its best epoch's test_nmse_db"

# ---- the campaign: the realistic PA is calibrated to look like DPA_200MHz (domain notes:
# gain-only NMSE about -20 dB, ACLR about -30 dBc, band-limited input below -60 dBc)
gn=$(json_num "$s" gain_nmse_db)
mp=$(json_num "$s" nmse_test_db)
ain=$(json_num "${s#*\"aclr_opendpd\":\{\"in\":\{}" avg_db)
aout=$(json_num "${s#*\"aclr_opendpd\":*\"out\":\{}" avg_db)
evm=$(json_num "$s" evm_out_pct)
evmin=$(json_num "$s" evm_in_pct)
in_range "$gn" -25 -15 "gain-only NMSE (dB)"
in_range "$aout" -40 -25 "output ACLR (dBc)"
in_range "$ain" -400 -60 "input ACLR (dBc)"
in_range "$evm" 1 15 "output EVM (%)"
in_range "$evmin" 0 1 "input EVM (%)"
if awk -v a="$mp" -v b="$gn" 'BEGIN { exit !(a != "" && a < b - 5) }'; then pass; else fail "MP fit ($mp dB) not 5 dB better than gain-only ($gn dB)"; fi
near "$(json_num "$s" samples)" 92160 0 "one frame of samples"
near "$e0" "$evm" 0.5 "true-PA EVM without DPD close to the measured output's"

# report --data on the demo's data set gives the same campaign tables
run report --data "$D/data" --out "$TMP/r.html"
expect_rc 0 "report --data"
has "$OUT" "report: $TMP/r.html" "report says where it wrote"
r=$(cat "$TMP/r.html")
campaign=${html#*The simulated campaign}
rows() { grep -o '<tr><td>[A-Z][^<]*</td><td class="num">[^<]*</td><td class="num">[^<]*</td>' <<<"$1"; }
if [ -n "$(rows "$campaign")" ] && [ "$(rows "$campaign")" = "$(rows "$r")" ]; then pass; else fail "demo and report tables differ"; fi
# inspect of the same data: the train split's gain NMSE is close to the whole set's
run inspect --json "$D/data"
expect_rc 0 "inspect demo data"
t=$(tr -d ' \t\n' <<<"$OUT")
near "$(json_num "${t#*\"splits\":\{\"train\":\{}" gain_nmse_db)" "$gn" 0.5 "train gain NMSE vs whole data set"
# the DPD run re-evaluates to the same true-PA numbers
run eval --run "$D/run-dpd" --json
expect_rc 0 "eval of the demo's DPD run"
near "$(json_num "$OUT" true_test_aclr_avg_db)" "$a1" 0.005 "eval reproduces the DPD's true-PA ACLR"
near "$(json_num "$OUT" no_dpd_test_aclr_avg_db)" "$a0" 0.005 "eval reproduces the true PA's ACLR without DPD"

# a second demo over the same directory replaces the data and both runs
run demo --out "$D" --quick -q --epochs-pa 1 --epochs-dpd 1
expect_rc 0 "demo again, quiet, 1 epoch each"
if [ -z "$ERR" ]; then pass; else fail "-q printed progress: $ERR"; fi
if [ -z "$OUT" ]; then pass; else fail "-q printed results: $OUT"; fi
n=$(wc -l <"$D/run-dpd/metrics.jsonl")
if [ "$n" -eq 1 ]; then pass; else fail "run-dpd/metrics.jsonl has $n lines after a 1-epoch rerun, want 1"; fi
left=$(find "$D" -name '*.tmp*' | wc -l)
if [ "$left" -eq 0 ]; then pass; else fail "$left temporary files left behind"; fi

run demo
expect_rc 2 "demo without --out"
has "$ERR" "missing --out DIR" "demo usage message"
run demo --out "$TMP/x" --samples many
expect_rc 2 "demo --samples many"
has "$ERR" "distdpd demo: --samples: expected a positive integer, got 'many'" "demo --samples message"
run demo --out "$TMP/x" --epochs-pa 0
expect_rc 2 "demo --epochs-pa 0"
has "$ERR" "distdpd demo: --epochs-pa: must be in [1, 100000], got '0'" "demo --epochs-pa message"
run demo --out "$TMP/x" --dpd-model nosuch
expect_rc 2 "demo --dpd-model nosuch"
has "$ERR" "--dpd-model: unknown model 'nosuch'" "demo unknown model message"
if [ ! -e "$TMP/x" ]; then pass; else fail "a refused demo left $TMP/x behind"; fi

finish
