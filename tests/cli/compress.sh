#!/bin/bash
# Gradient compression through the command line (train-pa --compress SPEC
# [--error-feedback on|off], distdpd compressors) on a tiny simulated data set:
#   - distdpd compressors lists the 11 compressors (text and JSON);
#   - bad --compress values are usage errors (exit 2) naming the bad name, key or value
#     (also empty settings and hexadecimal values); --error-feedback needs a lossy
#     --compress (also on --resume) and names a bad value on every path;
#   - one process with int8: metrics.jsonl records compression_ratio (4n / (n + 4 ceil(n /
#     256)) for chunks of 256: 3.8 .. 4 here), comm_bytes_per_step and
#     compress_time_s; parallel.json records the full compressor spec;
#   - fp32 (lossless) trains exactly like the uncompressed run (same eval metrics);
#   - a resumed run continues with the compressor recorded in last.ckpt (also when
#     parallel.json was never written: a crash), and its result equals a straight run
#     (the residual is checkpointed: bit-exact resume);
#   - 2 ranks under mpirun with topk: both ranks agree (one summary), ratio recorded.
set -euo pipefail
source "$(dirname "$0")/common.bash"

run compressors
expect_rc 0 "compressors"
for c in none fp32 fp16 bf16 int8 int4 sign topk randk powersgd dgc; do has "$OUT" "  $c " "compressors lists $c"; done
run compressors --json
expect_rc 0 "compressors --json"
has "$OUT" '"name":	"dgc"' "json lists dgc"

D=$TMP/sim
"$DD_CLI" simulate --out "$D" --samples 8000 --pa wiener-hammerstein -q
BASE=(--model gru --hidden 6 --frame 32 --stride 4 --batch 30 --lr 2e-2 --epochs 2)
SMALL=("${BASE[@]}" -q)

run train-pa --data "$D" "${SMALL[@]}" --compress zip --out "$TMP/bad"
expect_rc 2 "unknown compressor"
has "$ERR" "unknown compressor 'zip'" "names the compressor"
has "$ERR" "powersgd" "lists the choices"
run train-pa --data "$D" "${SMALL[@]}" --compress topk,density=2 --out "$TMP/bad"
expect_rc 2 "density out of range"
has "$ERR" "density = 2 is out of range" "names the value"
run train-pa --data "$D" "${SMALL[@]}" --compress int8,bits=3 --out "$TMP/bad"
expect_rc 2 "unknown key"
has "$ERR" "unknown key 'bits'" "names the key"
run train-pa --data "$D" "${SMALL[@]}" --compress powersgd,rank=x --out "$TMP/bad"
expect_rc 2 "not a number"
has "$ERR" "rank = 'x' is not a number" "names the key and value"
run train-pa --data "$D" "${SMALL[@]}" --error-feedback off --out "$TMP/bad"
expect_rc 2 "--error-feedback alone"
has "$ERR" "--error-feedback needs --compress" "says why"
run train-pa --data "$D" "${SMALL[@]}" --compress int8 --error-feedback maybe --out "$TMP/bad"
expect_rc 2 "--error-feedback value"
has "$ERR" "distdpd train-pa: --error-feedback: expected on or off, got 'maybe'" "names the bad value"
# every path names the bad value (without --compress it said "needs --compress")
run train-pa --data "$D" "${SMALL[@]}" --error-feedback maybe --out "$TMP/bad"
expect_rc 2 "--error-feedback maybe without --compress"
has "$ERR" "distdpd train-pa: --error-feedback: expected on or off, got 'maybe'" "names the bad value without --compress"
# an empty setting is an error (strtok skipped it: 'topk,' ran as 'topk')
for spec in 'topk,' 'topk,,density=0.1' 'int8,chunk=128,'; do
    run train-pa --data "$D" "${SMALL[@]}" --compress "$spec" --out "$TMP/bad"
    expect_rc 2 "--compress '$spec'"
    has "$ERR" "distdpd train-pa: --compress '$spec': empty setting after ',' (expected key=value)" "--compress '$spec' message"
done
run train-pa --data "$D" "${SMALL[@]}" --compress ',topk' --out "$TMP/bad"
expect_rc 2 "--compress ',topk'"
has "$ERR" "--compress ',topk': no compressor name" "leading comma message"
# values are decimal: 0x10 was read as 16
run train-pa --data "$D" "${SMALL[@]}" --compress int8,chunk=0x10 --out "$TMP/bad"
expect_rc 2 "--compress int8,chunk=0x10"
has "$ERR" "--compress 'int8,chunk=0x10': chunk = '0x10' is not a number" "hexadecimal setting refused"
run train-pa --data "$D" "${SMALL[@]}" --compress topk,density=inf --out "$TMP/bad"
expect_rc 2 "--compress topk,density=inf"
has "$ERR" "density = 'inf' is not a number" "inf setting refused"
# --error-feedback with a lossless compressor would be ignored
run train-pa --data "$D" "${SMALL[@]}" --compress fp32 --error-feedback on --out "$TMP/bad"
expect_rc 2 "--error-feedback with fp32"
has "$ERR" "distdpd train-pa: --error-feedback applies to lossy compressors only; fp32 loses nothing" "fp32 message"
run train-pa --data "$D" "${SMALL[@]}" --compress none --error-feedback off --out "$TMP/bad"
expect_rc 2 "--error-feedback with none"
has "$ERR" "--error-feedback applies to lossy compressors only; none loses nothing" "none message"
[ ! -e "$TMP/bad" ] && pass || fail "a usage error wrote no run directory"

ev() { "$DD_CLI" eval --run "$1" --ckpt last --json | sed 's/,"eval_time_s":[^,}]*//; s/"run":"[^"]*",//'; }

# int8 on one process: accounting recorded
run train-pa --data "$D" "${SMALL[@]}" --compress int8 --out "$TMP/i8"
expect_rc 0 "int8 training"
M=$(tail -n 1 "$TMP/i8/metrics.jsonl")
R=$(json_num "$M" compression_ratio)
# n / (n/4 + 4 ceil(n/256)) with n the gradient floats (a few hundred here): 3.8 .. 4
awk -v r="$R" 'BEGIN { exit !(r > 3.8 && r < 4.0) }' && pass || fail "int8 compression ratio in (3.8, 4): '$R'"
has "$M" '"comm_bytes_per_step":' "metrics.jsonl: comm_bytes_per_step"
CT=$(json_num "$M" compress_time_s)
awk -v t="$CT" 'BEGIN { exit !(t > 0) }' && pass || fail "compress_time_s > 0: '$CT'"
has "$(cat "$TMP/i8/parallel.json")" '"compress":	"int8,ef=1,density=' "parallel.json: the full spec"

# --resume: a bad --error-feedback is named; on a run trained without compression it is refused
run train-pa --resume "$TMP/i8" --error-feedback maybe
expect_rc 2 "--resume --error-feedback maybe"
has "$ERR" "distdpd train-pa: --error-feedback: expected on or off, got 'maybe'" "names the bad value with --resume"
# decimal settings: seed=010 is ten
run train-pa --data "$D" "${SMALL[@]}" --epochs 1 --compress topk,seed=010 --out "$TMP/seed010"
expect_rc 0 "--compress topk,seed=010"
has "$(cat "$TMP/seed010/parallel.json")" ',seed=10"' "seed=010 is ten"

# fp32 is lossless: equals the uncompressed run
run train-pa --data "$D" "${SMALL[@]}" --out "$TMP/plain"
expect_rc 0 "plain training"
run train-pa --data "$D" "${SMALL[@]}" --compress fp32 --out "$TMP/fp32"
expect_rc 0 "fp32 training"
[ "$(ev "$TMP/plain")" = "$(ev "$TMP/fp32")" ] && pass || fail "fp32 equals the uncompressed run: $(ev "$TMP/plain") vs $(ev "$TMP/fp32")"

run train-pa --resume "$TMP/plain" --epochs 3 --error-feedback on
expect_rc 2 "--resume --error-feedback on a run without compression"
has "$ERR" "distdpd train-pa: --error-feedback needs --compress: $TMP/plain was trained without it" "resume without compression message"

# resume keeps the compressor and its residual: 1 + 1 epochs == 2 epochs
run train-pa --data "$D" "${SMALL[@]}" --compress topk,density=0.1 --out "$TMP/straight"
expect_rc 0 "topk straight"
run train-pa --data "$D" "${SMALL[@]}" --compress topk,density=0.1 --epochs 1 --out "$TMP/split"
expect_rc 0 "topk first epoch"
run train-pa --resume "$TMP/split" --epochs 2 -q
expect_rc 0 "topk resumed"
has "$(cat "$TMP/split/parallel.json")" '"compress":	"topk,' "the resumed run recorded topk"
[ "$(ev "$TMP/straight")" = "$(ev "$TMP/split")" ] && pass || fail "resume with the residual equals a straight run"
# a run that crashed before writing parallel.json: the compressor comes from last.ckpt
run train-pa --data "$D" "${SMALL[@]}" --compress topk,density=0.1 --epochs 1 --out "$TMP/crashed"
expect_rc 0 "topk first epoch (crashed run)"
rm -f "$TMP/crashed/parallel.json"
run train-pa --resume "$TMP/crashed" --epochs 2 -q
expect_rc 0 "topk resumed without parallel.json"
has "$(cat "$TMP/crashed/parallel.json")" '"compress":	"topk,' "the compressor recorded in last.ckpt continues"
[ "$(ev "$TMP/straight")" = "$(ev "$TMP/crashed")" ] && pass || fail "resume from last.ckpt alone equals a straight run"

if command -v mpirun >/dev/null 2>&1; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    export OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1
    set +e
    timeout 120 mpirun -np 2 "$DD_CLI" train-pa --data "$D" "${BASE[@]}" --progress lines --compress topk,density=0.05 \
        --out "$TMP/mp" >"$TMP/mp.out" 2>"$TMP/mp.err"
    RC=$?
    set -e
    expect_rc 0 "2 ranks with topk"
    [ "$(grep -c '^compression:' "$TMP/mp.out")" = 1 ] && pass || fail "one summary line: $(cat "$TMP/mp.out")"
    has "$(cat "$TMP/mp.err")" "compression topk: ratio" "per-epoch compression line"
    M=$(tail -n 1 "$TMP/mp/metrics.jsonl")
    R=$(json_num "$M" compression_ratio)
    awk -v r="$R" 'BEGIN { exit !(r > 5) }' && pass || fail "topk 5 % ratio > 5: '$R'"
else
    echo "note: mpirun not found: the 2-rank case is not run"
fi
finish
