#!/bin/bash
# config.json's provenance (src/train/provenance.c): the git commit and build type the
# command was built from, the SIMD path, OpenBLAS and its core type, and CRC32C checksums
# of the data set's files - checked against git, against a CRC32C computed here in Python
# (bitwise, independent of dd_crc32c) and against a copy of the data set with one byte
# changed. A run's config.json with these keys is still a valid --config.
set -euo pipefail
source "$(dirname "$0")/common.bash"

D=$TMP/sim
run simulate --out "$D" --samples 6000 -q
expect_rc 0 "simulate"
SMALL=(--model gru --hidden 4 --frame 32 --stride 8 --epochs 1 -q)
run train-pa --data "$D" "${SMALL[@]}" --out "$TMP/r1"
expect_rc 0 "train-pa"
C=$(cat "$TMP/r1/config.json")
py() { python3 -c "import json,sys; c=json.load(open(sys.argv[1])); print($2)" "$TMP/$1/config.json"; }

if command -v python3 >/dev/null; then
    commit=$(py r1 "c['build']['git_commit']")
    if git -C "$DD_SOURCE_DIR" rev-parse HEAD >/dev/null 2>&1; then
        head=$(git -C "$DD_SOURCE_DIR" rev-parse HEAD)
        if [ "$commit" = "$head" ]; then pass; else fail "build.git_commit $commit, HEAD is $head (reconfigure?)"; fi
    else
        echo "no git checkout: git_commit '$commit' not compared"
    fi
    bt=$(py r1 "c['build']['build_type']")
    [ -n "$bt" ] && [ "$bt" != unknown ] && pass || fail "build_type '$bt'"
    simd=$(py r1 "c['build']['simd']")
    [[ "$simd" =~ ^(generic|avx2|avx512)$ ]] && pass || fail "simd '$simd'"
    core=$(py r1 "c['build']['blas_core']")
    [ -n "$core" ] && [ "$core" != unknown ] && pass || fail "blas_core '$core'"
    has "$(py r1 "c['build']['blas_config']")" "OpenBLAS" "blas_config is OpenBLAS's"
    # CRC32C computed bitwise in Python (tests/crc32c.py): spec.json and the total
    want=$(python3 tests/crc32c.py "$D/spec.json")
    got=$(py r1 "c['data_checksum']['files']['spec.json']")
    if [ "$got" = "$want" ]; then pass; else fail "spec.json CRC32C $got, Python says $want"; fi
    bytes=$(py r1 "c['data_checksum']['bytes']")
    total=$(find "$D" -maxdepth 1 -type f ! -name '.*' -printf '%s\n' | awk '{ s += $1 } END { print s }')
    near "$bytes" "$total" 0 "data_checksum.bytes = the files' sizes"
    nfiles=$(py r1 "len(c['data_checksum']['files'])")
    near "$nfiles" "$(find "$D" -maxdepth 1 -type f ! -name '.*' | wc -l)" 0 "every file checksummed"
    # a copy with one byte changed: that file's checksum and the total change, no other
    cp -r "$D" "$TMP/sim2"
    sed -i '2s/^\(.\)/9/' "$TMP/sim2/val_input.csv"
    run train-pa --data "$TMP/sim2" "${SMALL[@]}" --out "$TMP/r2"
    expect_rc 0 "train-pa on the changed copy"
    a=$(py r1 "c['data_checksum']['files']['val_input.csv']")
    b=$(py r2 "c['data_checksum']['files']['val_input.csv']")
    [ "$a" != "$b" ] && pass || fail "a changed byte left val_input.csv's CRC32C at $a"
    [ "$(py r1 "c['data_checksum']['crc32c']")" != "$(py r2 "c['data_checksum']['crc32c']")" ] && pass || fail "total unchanged"
    same=$(python3 -c "
import json,sys
a=json.load(open(sys.argv[1]))['data_checksum']['files']; b=json.load(open(sys.argv[2]))['data_checksum']['files']
print(sum(a[k]==b[k] for k in a))" "$TMP/r1/config.json" "$TMP/r2/config.json")
    near "$same" $((nfiles - 1)) 0 "the other files keep their checksums"
else
    echo "python3 absent: only the keys are checked"
fi
for k in '"git_commit"' '"build_type"' '"simd"' '"blas_core"' '"data_checksum"' '"crc32c"'; do has "$C" "$k" "config.json has $k"; done
# the run's config.json, provenance and all, is a recipe
run train-pa --config "$TMP/r1/config.json" --out "$TMP/r3" -q
expect_rc 0 "--config of a config.json with provenance"
finish
