#!/bin/bash
# distdpd simulate: writes a data set that inspect reads back with the requested sample
# count in every format (OpenDPD CSV, binary, SigMF), the same samples in CSV and binary,
# bit-identical output for the same seed, a spec.json and simulation.json describing
# the run, physically ordered results (more drive -> more spectral regrowth, worse
# gain-only fit; the PA output has a larger EVM than its input), pa.json recording the
# PA that made the data (model, drive, SNR, calibration) so that train-dpd measures the
# DPD on it, model and preset lists, and exact messages / exit statuses for bad option
# values.
set -euo pipefail
source "$(dirname "$0")/common.bash"

N=20000 # split 0.6/0.2/0.2 -> 12000 / 4000 / 4000
run simulate --out "$TMP/a" --samples $N --seed 7
expect_rc 0 "simulate (opendpd)"
has "$OUT" "train 12000, val 4000, test 4000 samples" "summary split sizes"
has "$OUT" "ACLR (OpenDPD) output:" "summary ACLR"
has "$OUT" "gain-only fit NMSE:" "summary NMSE"
for f in spec.json simulation.json {train,val,test}_{input,output}.csv; do
    if [ -s "$TMP/a/$f" ]; then pass; else fail "simulate did not write $f"; fi
done
n=$(($(wc -l <"$TMP/a/train_input.csv") - 1))
if [ "$n" -eq 12000 ]; then pass; else fail "train_input.csv has $n rows, want 12000"; fi
spec=$(cat "$TMP/a/spec.json")
near "$(json_num "$spec" input_signal_fs)" 92160000 0 "spec.json sample rate of the default preset"
near "$(json_num "$spec" bw_main_ch)" 20000000 0 "spec.json channel bandwidth"
sim=$(cat "$TMP/a/simulation.json")
near "$(json_num "$sim" samples)" $N 0 "simulation.json samples"
has "$(tr -d ' \t\n' <<<"$sim")" '"model":"realistic"' "simulation.json PA model"
has "$(tr -d ' \t\n' <<<"$sim")" '"seed":"7"' "simulation.json seed"

run inspect "$TMP/a"
expect_rc 0 "inspect the simulated data set"
has "$OUT" "samples:      train 12000, val 4000, test 4000 (total $N)" "inspect reads back $N samples"
has "$OUT" "sample rate:  92.16 MHz" "inspect sample rate"
table_a=$(awk '$1 == "train" || $1 == "val" || $1 == "test"' <<<"$OUT")

# the same seed gives the same bytes; another seed other samples
run simulate --out "$TMP/b" --samples $N --seed 7 -q
expect_rc 0 "simulate again"
if [ -z "$OUT" ]; then pass; else fail "-q still printed: $OUT"; fi
for f in {train,val,test}_{input,output}.csv; do
    if cmp -s "$TMP/a/$f" "$TMP/b/$f"; then pass; else fail "$f differs between two runs with seed 7"; fi
done
run simulate --out "$TMP/s8" --samples $N --seed 8 -q
if cmp -s "$TMP/a/train_input.csv" "$TMP/s8/train_input.csv"; then fail "seed 8 gave the seed-7 samples"; else pass; fi

# binary and SigMF hold the same data
run simulate --out "$TMP/c" --samples $N --seed 7 --format bin
expect_rc 0 "simulate --format bin"
if [ -s "$TMP/c/data.ddb" ]; then pass; else fail "no data.ddb"; fi
for p in "$TMP/c" "$TMP/c/data.ddb"; do
    run inspect "$p"
    expect_rc 0 "inspect $p"
    has "$OUT" "format:       bin" "binary format detected"
    has "$OUT" "(total $N)" "binary sample count"
    table_c=$(awk '$1 == "train" || $1 == "val" || $1 == "test"' <<<"$OUT")
    if [ "$table_c" = "$table_a" ]; then pass; else fail "binary data measure differently from CSV: $table_c vs $table_a"; fi
done
run simulate --out "$TMP/d" --samples $N --seed 7 --format sigmf -q
expect_rc 0 "simulate --format sigmf"
run inspect "$TMP/d"
expect_rc 0 "inspect the SigMF data set"
has "$OUT" "format:       sigmf" "SigMF format detected"
has "$OUT" "(total $N)" "SigMF sample count"
# the SigMF output recording holds the CSV splits back to back: metrics reads both
{ cat "$TMP/a/train_output.csv"; tail -n +2 "$TMP/a/val_output.csv"; tail -n +2 "$TMP/a/test_output.csv"; } >"$TMP/all_out.csv"
run metrics --ref "$TMP/all_out.csv" --test "$TMP/d/signal_output.sigmf-meta" --spec "$TMP/a/spec.json" --json --nmse pooled
expect_rc 0 "metrics on a SigMF recording"
near "$(json_num "$OUT" nmse_db)" -400 0.001 "SigMF samples equal the CSV samples"

# physics: more drive, more regrowth and a worse linear fit
aclr() { sed -n 's/^ACLR (OpenDPD) output:.*average *\(-\{0,1\}[0-9.]*\) dBc$/\1/p' <<<"$1"; }
gnmse() { sed -n 's/^gain-only fit NMSE: *\(-\{0,1\}[0-9.]*\) dB$/\1/p' <<<"$1"; }
run simulate --out "$TMP/lo" --samples 30720 --drive -6
expect_rc 0 "simulate --drive -6"
lo_a=$(aclr "$OUT")
lo_n=$(gnmse "$OUT")
run simulate --out "$TMP/hi" --samples 30720 --drive 3
expect_rc 0 "simulate --drive 3"
hi_a=$(aclr "$OUT")
hi_n=$(gnmse "$OUT")
if awk -v a="$lo_a" -v b="$hi_a" 'BEGIN { exit !(a + 5 < b) }'; then pass; else fail "ACLR at -6 dB drive ($lo_a) not 5 dB below +3 dB ($hi_a)"; fi
if awk -v a="$lo_n" -v b="$hi_n" 'BEGIN { exit !(a + 3 < b) }'; then pass; else fail "gain NMSE at -6 dB ($lo_n) not 3 dB below +3 dB ($hi_n)"; fi

# one full frame: EVM demodulated; the PA degrades it
run simulate --out "$TMP/f"
expect_rc 0 "simulate one frame"
has "$OUT" "train 55296, val 18432, test 18432" "one frame = 92160 samples"
ein=$(sed -n 's/^EVM (demodulated): *input \([0-9.]*\) %.*/\1/p' <<<"$OUT")
eout=$(sed -n 's/^EVM (demodulated):.*output \([0-9.]*\) %.*/\1/p' <<<"$OUT")
if awk -v a="$ein" -v b="$eout" 'BEGIN { exit !(a != "" && b != "" && a < 1 && b > 2 * a) }'; then pass; else fail "EVM input '$ein' %, output '$eout' %"; fi

# pa.json: the PA that made the data, with its calibration (train-dpd rebuilds the true PA
# from it); non-default model, drive and SNR must be the ones recorded
run simulate --out "$TMP/p" --samples 20000 --pa wiener --drive 2 --snr 30 --seed 5 -q
expect_rc 0 "simulate --pa wiener --drive 2 --snr 30"
if [ -s "$TMP/p/pa.json" ]; then pass; else fail "simulate did not write pa.json"; fi
pj=$(tr -d ' \t\n' <"$TMP/p/pa.json")
sj=$(tr -d ' \t\n' <"$TMP/p/simulation.json")
has "$pj" '"model":"wiener"' "pa.json model"
has "$pj" '"seed":"6"' "pa.json noise seed = seed + 1"
near "$(json_num "$pj" snr_db)" 30 0 "pa.json SNR"
near "$(json_num "$pj" drive_db)" "$(json_num "${sj#*\"pa\":\{}" drive_db)" 0 "pa.json drive = simulation.json drive"
near "$(json_num "$pj" fs)" 92160000 0 "pa.json sample rate = the signal's"
for k in in_gain out_power noise_var; do
    near "$(json_num "$pj" $k)" "$(json_num "${sj#*\"pa\":\{}" $k)" 1e-12 "pa.json calibration $k = simulation.json's"
done
in_range_p() { if awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v != "" && v >= lo && v <= hi) }'; then pass; else fail "$4 = '$1' not in [$2, $3]"; fi; }
in_range_p "$(json_num "$pj" in_gain)" 1e-3 1e3 "pa.json in_gain calibrated"
# train-dpd on the simulated set measures the DPD on that true PA (rebuilt from pa.json)
run train-pa --data "$TMP/p" --model gru --hidden 4 --epochs 1 --stride 16 --out "$TMP/p/run-pa" --progress none
expect_rc 0 "train-pa on the simulated set"
run train-dpd --pa-run "$TMP/p/run-pa" --model gru --hidden 4 --epochs 1 --stride 16 --out "$TMP/p/run-dpd" --progress none
expect_rc 0 "train-dpd on the simulated set"
has "$OUT" "true PA:" "train-dpd reports the true PA"
cj=$(tr -d ' \t\n' <"$TMP/p/run-dpd/config.json")
has "$cj" '"true_pa":{"available":true,"name":"wiener"' "config.json: true PA rebuilt from pa.json"
# without pa.json the same set falls back to simulation.json (the model's defaults):
# both rebuild the same wiener PA here, so the no-DPD numbers agree
a_pj=$(json_num "${cj#*\"no_dpd_test\":\{}" aclr_avg_db)
rm "$TMP/p/pa.json"
run eval --run "$TMP/p/run-dpd" --json
expect_rc 0 "eval without pa.json"
near "$(json_num "$OUT" no_dpd_test_aclr_avg_db)" "$a_pj" 0.05 "simulation.json fallback rebuilds the same PA"

# other models and presets
run simulate --out "$TMP/g" --samples 5000 --pa saleh --snr 0 -q
expect_rc 0 "simulate --pa saleh --snr 0"
run simulate --pa list
expect_rc 0 "--pa list"
for m in realistic saleh rapp mp-ding; do has "$OUT" "  $m " "--pa list shows $m"; done
run simulate --signal list
expect_rc 0 "--signal list"
for p in default 1x20 1x100 10x20; do has "$OUT" "  $p " "--signal list shows $p"; done

# ---- bad option values
run simulate --out "$TMP/x" --samples abc
expect_rc 2 "--samples abc"
has "$ERR" "distdpd simulate: --samples: expected a positive integer, got 'abc'" "--samples abc message"
run simulate --out "$TMP/x" --samples -5
expect_rc 2 "--samples -5"
has "$ERR" "--samples: expected a positive integer, got '-5'" "--samples -5 message"
run simulate --out "$TMP/x" --samples 0
expect_rc 2 "--samples 0"
has "$ERR" "--samples: must be in [1, " "--samples 0 message"
run simulate --out "$TMP/x" --samples 12x
expect_rc 2 "--samples 12x"
run simulate --out "$TMP/x" --seed -1
expect_rc 2 "--seed -1"
has "$ERR" "distdpd simulate: --seed: expected a non-negative integer, got '-1'" "--seed message"
run simulate --out "$TMP/x" --drive abc
expect_rc 2 "--drive abc"
has "$ERR" "distdpd simulate: --drive: expected a number, got 'abc'" "--drive message"
run simulate --out "$TMP/x" --drive 100
expect_rc 2 "--drive 100"
has "$ERR" "--drive: must be in [-60, 40], got '100'" "--drive range message"
run simulate --out "$TMP/x" --snr nan
expect_rc 2 "--snr nan"
run simulate --out "$TMP/x" --qam 32
expect_rc 2 "--qam 32"
has "$ERR" "--qam: expected one of 4, 16, 64, 256, 1024; got '32'" "--qam message"
run simulate --out "$TMP/x" --format csv
expect_rc 2 "--format csv"
has "$ERR" "--format: expected one of opendpd, bin, sigmf; got 'csv'" "--format message"
run simulate --out "$TMP/x" --pa nosuchpa
expect_rc 1 "--pa nosuchpa"
has "$ERR" "nosuchpa" "unknown PA named"
run simulate --out "$TMP/x" --signal 3x7
expect_rc 1 "--signal 3x7"
has "$ERR" "3x7" "unknown preset named"
run simulate --samples 100
expect_rc 2 "missing --out"
has "$ERR" "distdpd simulate: missing --out DIR" "missing --out message"
if [ ! -e "$TMP/x" ]; then pass; else fail "a failed simulate left $TMP/x behind"; fi
printf 'not a directory\n' >"$TMP/file"
run simulate --out "$TMP/file/sub" --samples 100
expect_rc 1 "--out below a file"
has "$ERR" "$TMP/file" "unwritable output named"

finish
