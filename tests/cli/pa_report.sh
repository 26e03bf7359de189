#!/bin/bash
# The reports an RF engineer reads: a PA run's report.html has AM/AM and AM/PM of the model
# against the measured output (both curves in one plot each), the measured output's ACLR as
# reference lines in the ACLR curve and spectra in dB relative to the in-band mean; the
# data set report adds the ACLR of the OpenDPD bands on the Welch PSD and, on DPA_200MHz
# (whose input repeats in aligned 2,560-sample blocks: OpenDPD ACLR about -158 dBc), the one
# sentence explaining why the two disagree (found from the numbers; skipped without the
# data set); on the small simulated set the other cause found from the numbers: the
# zero-padded last segment of splits shorter than nperseg.
set -euo pipefail
source "$(dirname "$0")/common.bash"

small_sim
run train-pa --data "$D" "${SMALL[@]}" --epochs 1 --out "$TMP/pa" -q
expect_rc 0 train-pa
R=$(cat "$TMP/pa/report.html")
has "$R" "AM/AM: model against the measured output (test split)" "AM/AM plot"
has "$R" "AM/PM: model against the measured output (test split)" "AM/PM plot"
n=$(grep -o '>measured PA output<' <<<"$R" | wc -l)
[ "$n" -ge 3 ] && pass || fail "measured output in the spectrum, AM/AM and AM/PM legends: $n"
has "$R" "test, measured PA output" "measured ACLR reference line"
has "$R" "PSD (dB rel. in-band mean)" "spectra relative to the in-band mean"
hasnot "$R" "power per bin" "no other PSD scale"

run report --data "$D" --out "$TMP/sim.html" -q
expect_rc 0 "report of the simulated data set"
S=$(cat "$TMP/sim.html")
has "$S" "ACLR (OpenDPD bands, Welch PSD) average" "Welch ACLR row"
# splits of 7,200 / 2,400 / 2,400 samples with nperseg 3,072: OpenDPD's zero-padded last
# segment leaks (the input's aligned ACLR is far above its Welch one), said in one sentence
has "$S" "OpenDPD zero-pads the last segment (2400 samples hold 0 full segments and 2400 more)" "padding sentence"

DPA=../shared/data/opendpd/DPA_200MHz
if [ -f "$DPA/spec.json" ]; then
    run report --data "$DPA" --out "$TMP/dpa.html" -q
    expect_rc 0 "report of DPA_200MHz"
    P=$(cat "$TMP/dpa.html")
    has "$P" "The OpenDPD ACLR of the PA input (-158." "DPA_200MHz: the aligned ACLR of the input"
    has "$P" "repeats in aligned blocks of the segment length" "DPA_200MHz: the cause in one sentence"
else
    echo "DPA_200MHz not found at $DPA: its part skipped"
fi
finish
