#!/bin/bash
# Error handling shared by all commands: unknown and ambiguous options and missing values
# exit 2 with "distdpd CMD: ..." and a --help hint; numbers are decimal everywhere;
# unreadable inputs exit 1 naming the path; report/inspect option checks.
set -euo pipefail
source "$(dirname "$0")/common.bash"

for c in metrics inspect simulate report demo; do
    run "$c" --bogus-option
    expect_rc 2 "$c --bogus-option"
    has "$ERR" "distdpd $c: unknown option '--bogus-option'" "$c unknown option message"
    has "$ERR" "Try 'distdpd $c --help'." "$c help hint"
    run "$c" -Z
    expect_rc 2 "$c -Z"
    has "$ERR" "distdpd $c: unknown option '-Z'" "$c unknown short option message"
done
for c in simulate report demo; do
    run "$c" --out
    expect_rc 2 "$c --out without value"
    has "$ERR" "distdpd $c: option '--out' needs a value" "$c missing value message"
done

# an abbreviation of several long options is ambiguous, not unknown (issue 10, item 9)
run simulate --s 3 --out "$TMP/x"
expect_rc 2 "simulate --s"
has "$ERR" "distdpd simulate: ambiguous option '--s' (could be --signal, --samples, --seed, --snr, --symbols)" "--s message"
has "$ERR" "Try 'distdpd simulate --help'." "ambiguous option help hint"
run metrics --frob=3
expect_rc 2 "metrics --frob=3"
has "$ERR" "distdpd metrics: unknown option '--frob=3'" "a name that matches nothing stays unknown"
run simulate --sa 2000 --se 010 --out "$TMP/uniq" -q
expect_rc 0 "unique prefixes still work"

# numbers are decimal in every command: 010 is ten, 08 eight, 0x10 and hexadecimal floats refused
run simulate --out "$TMP/s010" --samples 2000 --seed 010 -q
expect_rc 0 "simulate --seed 010"
has "$(cat "$TMP/s010/simulation.json")" '"seed":	"10"' "simulate --seed 010 is ten"
run simulate --out "$TMP/s08" --samples 2000 --seed 08 -q
expect_rc 0 "simulate --seed 08"
has "$(cat "$TMP/s08/simulation.json")" '"seed":	"8"' "simulate --seed 08 is eight"
run simulate --out "$TMP/x" --samples 2000 --seed 0x10
expect_rc 2 "simulate --seed 0x10"
has "$ERR" "distdpd simulate: --seed: expected a non-negative integer, got '0x10'" "--seed 0x10 message"
run demo --out "$TMP/x" --quick --samples 4000 --epochs-pa 1 --epochs-dpd 1 --seed 0x10
expect_rc 2 "demo --seed 0x10"
has "$ERR" "distdpd demo: --seed: expected a non-negative integer, got '0x10'" "demo --seed 0x10 message"
run simulate --out "$TMP/x" --samples 2000 --drive 0x1p2
expect_rc 2 "simulate --drive 0x1p2"
has "$ERR" "distdpd simulate: --drive: expected a number, got '0x1p2'" "hexadecimal float refused"
run simulate --out "$TMP/x" --samples 2000 --snr inf
expect_rc 2 "simulate --snr inf"
has "$ERR" "distdpd simulate: --snr: expected a number, got 'inf'" "inf refused"
[ ! -e "$TMP/x" ] && pass || fail "a usage error wrote $TMP/x"

run inspect --json=yes "$TMP/a"
expect_rc 2 "--json=yes"
has "$ERR" "distdpd inspect: option '--json' takes no value" "flag given a value"

run inspect
expect_rc 2 "inspect without a data set"
has "$ERR" "distdpd inspect: missing DATASET" "inspect usage message"
run inspect "$TMP/a" "$TMP/b"
expect_rc 2 "inspect with two data sets"
run inspect "$TMP/nonexistent"
expect_rc 1 "inspect a missing data set"
has "$ERR" "$TMP/nonexistent" "missing data set named"
mkdir -p "$TMP/bad"
printf '{"input_signal_fs": 800e6, "bw_main_ch": 200e6, "bw_sub_ch": 20e6, "n_sub_ch": 10, "nperseg": 2560}\n' >"$TMP/bad/spec.json"
printf 'I,Q\n1,2\n' >"$TMP/bad/train_input.csv"
run inspect "$TMP/bad"
expect_rc 1 "inspect an incomplete data set"
has "$ERR" "$TMP/bad/" "incomplete data set: file named"

run report --data "$TMP/nonexistent" --out "$TMP/r.html"
expect_rc 1 "report on a missing data set"
has "$ERR" "$TMP/nonexistent" "report: missing data set named"
if [ ! -e "$TMP/r.html" ]; then pass; else fail "a failed report left a file"; fi
run report --data "$TMP/x"
expect_rc 2 "report without --out"
has "$ERR" "distdpd report: missing --out FILE" "report usage message"
run report --data "$TMP/x" --out "$TMP/r.html" --mp 7
expect_rc 2 "report --mp 7"
has "$ERR" "distdpd report: --mp: expected K,M with K in 1..16 and M in 1..64 (or 0), got '7'" "--mp message"

# report on a small simulated data set, without the MP fit, into an unwritable place
run simulate --out "$TMP/s" --samples 8000 -q
expect_rc 0 "simulate a small data set"
run report --data "$TMP/s" --out "$TMP/s/r.html" --mp 0 --title 'A <b>&"title"'
expect_rc 0 "report --mp 0"
r=$(cat "$TMP/s/r.html")
has "$r" "<title>A &lt;b&gt;&amp;&quot;title&quot;</title>" "title escaped"
hasnot "$r" "Memory polynomial" "--mp 0 skips the MP fit"
has "$r" "shorter than one OFDM frame" "EVM unavailable explained"
run report --data "$TMP/s" --out "$TMP/nodir/r.html"
expect_rc 1 "report into a missing directory"
has "$ERR" "$TMP/nodir/r.html" "unwritable report named"

finish
