#!/usr/bin/env bash
# Peak memory of `distdpd convert` against the data set's size: 2 M and 20 M samples in the
# binary format (320 MB) converted to SigMF, to binary, back from SigMF and (2 M only, or
# CV_CSV_20M=1 for both) to and from a single data.csv; peak RSS from /usr/bin/time -v and
# the ratio 20 M / 2 M side by side, each round trip checked byte-identical with cmp
# (docs/cli.md "distdpd convert", docs/data.md). By hand, not a timed test:
#   bash bench/convert_rss.sh [BUILD_DIR [OUT_DIR]]   (defaults: build, BUILD_DIR/convert-rss)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=${2:-$BUILD/convert-rss}
CLI=$BUILD/distdpd
[ -x "$CLI" ] || { echo "bench/convert_rss.sh: build first ($CLI missing)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench/convert_rss.sh: needs /usr/bin/time (Debian package time)" >&2; exit 1; }
rm -rf "$OUT"
mkdir -p "$OUT"
echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg); $(date -u +%Y-%m-%dT%H:%M:%SZ)"
rss() { # prints the peak RSS in MB of: distdpd ARGS
    /usr/bin/time -v "$CLI" "$@" -q 2>"$OUT/time.txt" >/dev/null
    awk '/Maximum resident/ { printf "%.1f", $6 / 1024 }' "$OUT/time.txt"
}
for n in 2 20; do
    "$CLI" simulate --out "$OUT/s$n" --samples ${n}000000 --format bin -q
done
printf "%-22s %10s %10s %8s\n" conversion "2M (MB)" "20M (MB)" ratio
row() { printf "%-22s %10s %10s %8s\n" "$1" "$2" "$3" "$(awk -v a="$2" -v b="$3" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", b / a; else print "-" }')"; }
declare -A R
for n in 2 20; do
    R[bs$n]=$(rss convert "$OUT/s$n/data.ddb" "$OUT/g$n" --to sigmf)
    R[bb$n]=$(rss convert "$OUT/s$n/data.ddb" "$OUT/b$n.ddb")
    R[sb$n]=$(rss convert "$OUT/g$n" "$OUT/gb$n.ddb")
    cmp "$OUT/s$n/data.ddb" "$OUT/gb$n.ddb" || { echo "bin -> sigmf -> bin changed the file ($n M)"; exit 1; }
    rm -rf "$OUT/g$n"_* "$OUT/b$n.ddb" "$OUT/gb$n.ddb"
    if [ "$n" = 2 ] || [ "${CV_CSV_20M:-0}" = 1 ]; then
        R[bc$n]=$(rss convert "$OUT/s$n/data.ddb" "$OUT/c$n" --to csv)
        R[cb$n]=$(rss convert "$OUT/c$n" "$OUT/cb$n.ddb")
        cmp "$OUT/s$n/data.ddb" "$OUT/cb$n.ddb" || { echo "bin -> csv -> bin changed the file ($n M)"; exit 1; }
        rm -rf "$OUT/c$n" "$OUT/cb$n.ddb"
    fi
done
row "bin -> sigmf" "${R[bs2]}" "${R[bs20]}"
row "bin -> bin" "${R[bb2]}" "${R[bb20]}"
row "sigmf -> bin" "${R[sb2]}" "${R[sb20]}"
row "bin -> csv" "${R[bc2]}" "${R[bc20]:--}"
row "csv -> bin" "${R[cb2]}" "${R[cb20]:--}"
echo "round trips byte-identical (cmp)"
rm -rf "$OUT"
