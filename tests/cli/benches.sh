#!/bin/bash
# Non-IID benches for federated learning:
# - `distdpd simulate --benches N --heterogeneity low|high`: every bench directory loads
#   (inspect, like train-pa --data) with its preset recorded in spec.json and listed in
#   benches.json; the benches' properties measured here from their samples (small-signal
#   gain, AM/AM compression, lag-1 correlation of the input = occupied bandwidth, input
#   PAPR) differ much more with high than with low heterogeneity, and low still differs
#   (no "non-IID" that is IID, no identical benches); the same seed gives the same bytes;
#   bad option combinations are usage errors; --format bin benches load with the preset in
#   simulation.json.
# - `distdpd split --by drive|time`: the parts partition each split exactly (every sample
#   row in exactly one part, in order for time), and drive bands are ordered by power.
set -euo pipefail
source "$(dirname "$0")/common.bash"

# Properties of a bench from its training split, computed from the samples only:
#   rho1   |sum x(n) x*(n-1)| / sum |x|^2 (a band-limited signal: falls as the occupied
#          fraction of the band grows)
#   comp   gain at |x| > 2 rms over gain at |x| < rms / 2, dB (AM/AM compression)
#   g0     small-signal gain (|x| < rms / 2), dB
#   papr   input PAPR, dB
props() {
    paste -d, "$1/train_input.csv" "$1/train_output.csv" | awk -F, '
        function lg(v) { return log(v) / log(10) }
        NR > 1 { xi[n] = $1; xq[n] = $2; yi[n] = $3; yq[n] = $4; p = $1 * $1 + $2 * $2; s += p; if (p > pk) pk = p; n++ }
        END {
            rms = sqrt(s / n)
            for (k = 0; k < n; k++) {
                a = sqrt(xi[k] ^ 2 + xq[k] ^ 2); b = sqrt(yi[k] ^ 2 + yq[k] ^ 2)
                if (a > 2 * rms) { hx += a; hy += b } else if (a < 0.5 * rms && a > 0) { lx += a; ly += b }
                if (k > 0) { cr += xi[k] * xi[k - 1] + xq[k] * xq[k - 1]; ci += xq[k] * xi[k - 1] - xi[k] * xq[k - 1] }
            }
            printf "%.5f %.4f %.4f %.4f\n", sqrt(cr ^ 2 + ci ^ 2) / s, 20 * lg((hy / hx) / (ly / lx)), 20 * lg(ly / lx), 10 * lg(pk / (s / n))
        }'
}

# spread (max - min) of column C of a property table
spread() { awk -v c="$2" 'NF { v = $c + 0; if (!m++ || v < lo) lo = v; if (m == 1 || v > hi) hi = v } END { printf "%.5f\n", hi - lo }' <<<"$1"; }
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

NB=8
declare -A P
for h in low high; do
    run simulate --benches $NB --heterogeneity $h --samples 6000 --seed 3 --out "$TMP/$h"
    expect_rc 0 "simulate --benches $NB --heterogeneity $h"
    lines=$(grep -c '^bench-0[0-7]: ' <<<"$OUT" || true)
    if [ "$lines" -eq $NB ]; then pass; else fail "$h: $lines bench lines printed, want $NB: $OUT"; fi
    list=$(tr -d ' \t\n' <"$TMP/$h/benches.json")
    has "$list" "\"heterogeneity\":\"$h\"" "$h: benches.json heterogeneity"
    has "$list" '"benches":8' "$h: benches.json count"
    table=""
    for k in 0 1 2 3 4 5 6 7; do
        b="$TMP/$h/bench-0$k"
        run inspect "$b"
        expect_rc 0 "$h: bench-0$k loads"
        has "$list" "\"path\":\"bench-0$k\"" "$h: benches.json lists bench-0$k"
        spec=$(tr -d ' \t\n' <"$b/spec.json")
        has "$spec" "\"bench\":{\"name\":\"bench-0$k\",\"heterogeneity\":\"$h\",\"pa_family\":" "$h: bench-0$k spec.json records its preset"
        n=$(($(wc -l <"$b/train_input.csv") + $(wc -l <"$b/val_input.csv") + $(wc -l <"$b/test_input.csv") - 3))
        near "$(json_num "$spec" samples)" "$n" 0 "$h: bench-0$k preset size = its samples"
        table+="$(props "$b") $n"$'\n'
    done
    P[$h]=$table
    echo "$h: rho1 comp_db g0_db papr_db samples"$'\n'"$table"
done

# the measured spreads: high heterogeneity differs in bandwidth, gain, compression, size
for col in 1 2 3 4; do
    lo=$(spread "${P[low]}" $col)
    hi=$(spread "${P[high]}" $col)
    echo "column $col spread: low $lo, high $hi"
    case $col in
    1) # bandwidth: one layout for low, eight for high
        if gt 0.01 "$lo"; then pass; else fail "low: input lag-1 correlation spread $lo, want < 0.01 (one layout)"; fi
        if gt "$hi" 0.2; then pass; else fail "high: input lag-1 correlation spread $hi, want > 0.2 (several bandwidths)"; fi ;;
    2 | 3) # compression, small-signal gain: differ in both, much more in high
        if gt "$lo" 0.1; then pass; else fail "low: column $col spread $lo dB: the benches do not differ"; fi
        if gt "$hi" "$(awk -v l="$lo" 'BEGIN { print 2 * l + 1 }')"; then pass; else fail "high: column $col spread $hi dB, want > 2 x low ($lo) + 1 dB"; fi ;;
    4) # PAPR: CFR targets in high
        if gt "$hi" "$lo"; then pass; else fail "high: PAPR spread $hi dB not above low's $lo dB"; fi ;;
    esac
done
# sizes: up to 4x apart in high (base x 2^(-1..1)), within 1.4x in low
ratio() { awk 'NF { v = $5 + 0; if (!m++ || v < lo) lo = v; if (m == 1 || v > hi) hi = v } END { printf "%.3f\n", hi / lo }' <<<"$1"; }
rl=$(ratio "${P[low]}")
rh=$(ratio "${P[high]}")
if gt 1.42 "$rl" && gt "$rl" 1.0; then pass; else fail "low: size ratio $rl, want in (1, 1.42)"; fi
if gt "$rh" 2.5 && gt 4.01 "$rh"; then pass; else fail "high: size ratio $rh, want in (2.5, 4]"; fi
# every high bench is a different PA family
fams=$(grep -o '"pa_family":[[:space:]]*"[a-z-]*"' "$TMP/high/benches.json" | sort -u | wc -l)
if [ "$fams" -eq 8 ]; then pass; else fail "high: $fams PA families over 8 benches, want 8"; fi
fams=$(grep -o '"pa_family":[[:space:]]*"[a-z-]*"' "$TMP/low/benches.json" | sort -u | wc -l)
if [ "$fams" -eq 1 ]; then pass; else fail "low: $fams PA families, want 1"; fi
# no two benches hold the same samples
sums=$(for k in 0 1 2 3 4 5 6 7; do head -n 200 "$TMP/low/bench-0$k/train_output.csv" | md5sum; done | sort -u | wc -l)
if [ "$sums" -eq 8 ]; then pass; else fail "low: only $sums distinct benches"; fi

# the same seed: the same bytes (every file); another seed: other benches
run simulate --benches $NB --heterogeneity high --samples 6000 --seed 3 --out "$TMP/high2" -q
expect_rc 0 "simulate --benches again"
if [ -z "$OUT" ]; then pass; else fail "-q still printed: $OUT"; fi
if diff -r "$TMP/high" "$TMP/high2" >/dev/null; then pass; else fail "same seed, different files: $(diff -rq "$TMP/high" "$TMP/high2" | head -3)"; fi
run simulate --benches 2 --heterogeneity high --samples 6000 --seed 4 --out "$TMP/s4" -q
expect_rc 0 "simulate --benches 2 --seed 4"
if cmp -s "$TMP/high/bench-00/train_input.csv" "$TMP/s4/bench-00/train_input.csv"; then fail "seed 4 gave the seed-3 bench"; else pass; fi

# binary benches: data.ddb per bench, the preset in simulation.json
run simulate --benches 2 --heterogeneity high --samples 3000 --seed 3 --format bin --out "$TMP/bin" -q
expect_rc 0 "simulate --benches --format bin"
for k in 0 1; do
    run inspect "$TMP/bin/bench-0$k"
    expect_rc 0 "binary bench-0$k loads"
    has "$OUT" "format:       bin" "bench-0$k is binary"
    has "$(tr -d ' \t\n' <"$TMP/bin/bench-0$k/simulation.json")" "\"bench\":{\"name\":\"bench-0$k\"" "binary bench-0$k: preset in simulation.json"
done

# option errors: usage (2); an existing bench set needs --force
run simulate --benches 0 --out "$TMP/e"
expect_rc 2 "--benches 0"
run simulate --benches 65 --out "$TMP/e"
expect_rc 2 "--benches 65"
run simulate --benches 2 --heterogeneity medium --out "$TMP/e"
expect_rc 2 "--heterogeneity medium"
has "$ERR" "low, high" "--heterogeneity lists the choices"
run simulate --heterogeneity low --out "$TMP/e"
expect_rc 2 "--heterogeneity without --benches"
run simulate --benches 2 --pa saleh --out "$TMP/e"
expect_rc 2 "--pa with --benches"
has "$ERR" "--pa: the bench presets choose it" "--pa with --benches message"
run simulate --benches 2 --seed 4 --samples 6000 --out "$TMP/s4" -q
expect_rc 1 "benches over existing benches"
has "$ERR" "benches.json already exists" "existing benches message"
run simulate --benches 2 --seed 4 --samples 6000 --out "$TMP/s4" -q --force
expect_rc 0 "--force replaces the benches"

# ---- distdpd split: a data set cut into benches by time segments or drive bands ----
# rows of split S of every part, in part order (headers dropped)
rows() { for d in "$1"/bench-*; do tail -n +2 "$d/${2}_input.csv" | paste -d, - <(tail -n +2 "$d/${2}_output.csv"); done; }
src_rows() { tail -n +2 "$1/${2}_input.csv" | paste -d, - <(tail -n +2 "$1/${2}_output.csv"); }
# frame powers of a CSV cut into frames of L rows: "min max" of the mean |x|^2
frame_range() { tail -n +2 "$1" | awk -F, -v L="$2" '{ s += $1 * $1 + $2 * $2 } NR % L == 0 { p = s / L; s = 0; if (!m++ || p < lo) lo = p; if (m == 1 || p > hi) hi = p } END { printf "%.9g %.9g\n", lo, hi }'; }

run simulate --out "$TMP/one" --samples 30000 --seed 5 -q # 18000 / 6000 / 6000 = 36 / 12 / 12 frames of 500
expect_rc 0 "simulate the source of split"
for by in time drive; do
    run split --data "$TMP/one" --by $by --parts 4 --frame 500 --out "$TMP/sp-$by"
    expect_rc 0 "split --by $by"
    lines=$(grep -c '^bench-0[0-3]: train ' <<<"$OUT" || true)
    if [ "$lines" -eq 4 ]; then pass; else fail "split --by $by: $lines lines, want 4: $OUT"; fi
    for s in train val test; do
        # exact partition: the same multiset of (input, output) rows, none lost or doubled
        if [ "$(rows "$TMP/sp-$by" $s | sort | md5sum)" = "$(src_rows "$TMP/one" $s | sort | md5sum)" ]; then pass; else
            fail "split --by $by: the parts' $s rows are not those of the source ($(rows "$TMP/sp-$by" $s | wc -l) vs $(src_rows "$TMP/one" $s | wc -l))"
        fi
        for k in 0 1 2 3; do
            n=$(($(wc -l <"$TMP/sp-$by/bench-0$k/${s}_input.csv") - 1))
            if [ "$n" -gt 0 ]; then pass; else fail "split --by $by: bench-0$k has no $s samples"; fi
        done
    done
    run inspect "$TMP/sp-$by/bench-02"
    expect_rc 0 "split --by $by: a bench loads"
done
# time: the parts in order are the source, and each part is one contiguous segment
for s in train val test; do
    if cmp -s <(rows "$TMP/sp-time" $s) <(src_rows "$TMP/one" $s); then pass; else fail "split --by time: $s parts in order differ from the source"; fi
done
near "$(($(wc -l <"$TMP/sp-time/bench-00/train_input.csv") - 1))" 4500 0 "split --by time: 18000 / 4 train samples"
# drive: bands ordered by frame power, measured from the parts' samples
for s in train val test; do
    prev=""
    for k in 0 1 2 3; do
        r=$(frame_range "$TMP/sp-drive/bench-0$k/${s}_input.csv" 500)
        if [ -n "$prev" ]; then
            if awk -v a="${prev#* }" -v b="${r% *}" 'BEGIN { exit !(a <= b) }'; then pass; else
                fail "split --by drive: $s: bench-0$k's lowest frame power ${r% *} below bench-0$((k - 1))'s highest ${prev#* }"
            fi
        fi
        prev=$r
    done
    lo=$(frame_range "$TMP/sp-drive/bench-00/${s}_input.csv" 500)
    hi=$(frame_range "$TMP/sp-drive/bench-03/${s}_input.csv" 500)
    if awk -v a="${lo% *}" -v b="${hi#* }" 'BEGIN { exit !(a < b) }'; then pass; else fail "split --by drive: $s: no power spread ($lo, $hi)"; fi
done
spec=$(tr -d ' \t\n' <"$TMP/sp-drive/bench-01/spec.json")
has "$spec" '"bench":{"name":"bench-01","source":' "split: spec.json records the part"
has "$spec" '"by":"drive","part":1,"frame":500' "split: spec.json records the mode"
# binary parts hold the same samples as the CSV parts
run split --data "$TMP/one" --by drive --parts 4 --frame 500 --format bin --out "$TMP/sp-bin" -q
expect_rc 0 "split --format bin"
for k in 0 3; do
    run inspect "$TMP/sp-drive/bench-0$k"
    a=$(awk '$1 == "train" || $1 == "val" || $1 == "test"' <<<"$OUT")
    run inspect "$TMP/sp-bin/bench-0$k"
    b=$(awk '$1 == "train" || $1 == "val" || $1 == "test"' <<<"$OUT")
    if [ -n "$a" ] && [ "$a" = "$b" ]; then pass; else fail "split: binary bench-0$k measures differently: $b vs $a"; fi
done
# the same split twice: the same bytes
run split --data "$TMP/one" --by drive --parts 4 --frame 500 --out "$TMP/sp-drive2" -q
if diff -r "$TMP/sp-drive" "$TMP/sp-drive2" >/dev/null; then pass; else fail "split --by drive twice: different files"; fi
# errors
run split --data "$TMP/one" --by drive --parts 4 --frame 2000 --out "$TMP/sp-e"
expect_rc 1 "split: too few frames"
has "$ERR" "split 'val' has 3 frames of 2000 samples, fewer than the 4 parts" "split: too few frames message"
run split --data "$TMP/one" --by drive --parts 4 --frame 500 --out "$TMP/sp-drive"
expect_rc 1 "split over existing benches"
run split --data "$TMP/one" --by size --parts 4 --out "$TMP/sp-e"
expect_rc 2 "split --by size"
run split --data "$TMP/one" --by time --parts 1 --out "$TMP/sp-e"
expect_rc 2 "split --parts 1"
run split --data "$TMP/nothere" --by time --parts 2 --out "$TMP/sp-e"
expect_rc 1 "split of a missing data set"

# the measured data set, when present
DPA=../shared/data/opendpd/DPA_200MHz
if [ -f "$DPA/spec.json" ]; then
    # the writer prints float32 exactly ("%.9g"), the source has its own digits: the
    # time split in order equals the source within float32 rounding, and the drive
    # split holds the time split's rows exactly
    run split --data "$DPA" --by drive --parts 4 --out "$TMP/dpa"
    expect_rc 0 "split DPA_200MHz --by drive"
    run split --data "$DPA" --by time --parts 4 --out "$TMP/dpa-t"
    expect_rc 0 "split DPA_200MHz --by time"
    for s in train val test; do
        if [ "$(rows "$TMP/dpa" $s | sort | md5sum)" = "$(rows "$TMP/dpa-t" $s | sort | md5sum)" ]; then pass; else fail "DPA_200MHz: the drive parts' $s rows are not the time parts'"; fi
        bad=$(paste -d, <(rows "$TMP/dpa-t" $s) <(src_rows "$DPA" $s) | awk -F, 'NF != 8 { b++; next } { for (i = 1; i <= 4; i++) { d = $i - $(i + 4); if (d < 0) d = -d; if (d > 1e-7 * (1 + ($(i + 4) < 0 ? -$(i + 4) : $(i + 4)))) b++ } } END { print b + 0 }')
        if [ "$bad" -eq 0 ]; then pass; else fail "DPA_200MHz: $bad values of the time parts' $s differ from the source"; fi
    done
else
    echo "DPA_200MHz absent: its split is not checked"
fi

finish
