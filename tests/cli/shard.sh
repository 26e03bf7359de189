#!/bin/bash
# Sharded data parallelism through the command line (mpirun -np N distdpd train-pa
# --shard zero1|zero2|zero3) on a tiny simulated data set: each mode at 2 ranks equals
# one process (eval of last.ckpt within 0.01 dB, val loss 1e-5 relative); parallel.json
# (written for every run, one process too) holds the shard mode and the "memory" object,
# whose optimiser bytes shrink with the ranks; a zero3 checkpoint written on 2 ranks
# resumes on one process without sharding and equals a straight run; --mem-limit-mb: a
# model whose arenas do not fit the limit on one process fails with a message naming what
# was being allocated, and trains under the same limit with zero3 on 4 ranks; usage
# errors (bad mode, --compress with zero2/zero3, bad limit) exit with status 2.
set -euo pipefail
source "$(dirname "$0")/common.bash"

mpi_setup

small_sim # D=$TMP/sim: 12,000 samples, Wiener-Hammerstein PA
SMALL=(--model resnet --hidden 8 --layers 3 --kernel 2 --frame 32 --stride 4 --batch 30 --lr 2e-2 --no-report)

run train-pa --data "$D" "${SMALL[@]}" --epochs 2 --out "$TMP/one" -q
expect_rc 0 "train-pa, one process"
REF=$(ev "$TMP/one")
P1=$(cat "$TMP/one/parallel.json")
has "$P1" '"shard":	"none"' "one process: parallel.json"
for k in params_bytes grads_bytes optim_bytes activations_bytes peak_rss_bytes; do
    v=$(json_num "$P1" "$k")
    if [ -n "$v" ] && awk -v a="$v" 'BEGIN { exit !(a > 0) }'; then pass; else fail "one process: memory.$k = '$v'"; fi
done
OPT1=$(json_num "$P1" optim_bytes)

for mode in zero1 zero2 zero3; do
    mrun 2 train-pa --data "$D" "${SMALL[@]}" --epochs 2 --shard "$mode" --out "$TMP/$mode" --progress none
    expect_rc 0 "2 ranks, --shard $mode ($ERR)"
    [ "$mode" = zero1 ] || has "$OUT" "--shard $mode: communication" "--shard $mode: summary line"
    same_metrics "$(ev "$TMP/$mode")" "$REF" "--shard $mode vs one process"
    PJ=$(cat "$TMP/$mode/parallel.json")
    has "$PJ" "\"shard\":	\"$mode\"" "--shard $mode: parallel.json"
    OPT=$(json_num "$PJ" optim_bytes)
    # the optimiser state of half the arena (a slice rounded up to 16 floats)
    if awk -v a="$OPT" -v b="$OPT1" 'BEGIN { exit !(a <= b / 2 + 128 && a >= b / 2 - 128) }'; then pass; else
        fail "--shard $mode: optimiser bytes $OPT, one process $OPT1 (expected about half)"
    fi
done

# ---- distdpd plan predicts every rank's memory of these runs within 10 % (parallel.json:
# the largest rank's training peaks). The simulated data: 7,200 training samples (1,793
# frames of 32 with stride 4), nperseg 3,072, one evaluation segment per split.
for mode in zero1 zero2 zero3; do
    run plan --model resnet --hidden 8 --layers 3 --kernel 2 --batch 30 --frame 32 --frames 1793 --nperseg 3072 \
        --eval-segments 1 --ranks 2 --shard "$mode" --json
    expect_rc 0 "plan --shard $mode"
    PJ=$(cat "$TMP/$mode/parallel.json")
    PL=$(tr -d '\n\t ' <<<"$OUT" | sed 's/.*"memory_bytes"://')
    for k in params grads optim activations; do
        meas=$(json_num "$PJ" "${k}_bytes")
        pred=$(json_num "$PL" "$k")
        if [ -n "$pred" ] && awk -v a="$pred" -v b="$meas" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 0.1 * b) }'
        then pass; else fail "plan --shard $mode: $k predicted '$pred' bytes, parallel.json '$meas'"; fi
    done
done

# ---- zero3 on 2 ranks, stopped after epoch 1, resumed on one process without sharding
mrun 2 train-pa --data "$D" "${SMALL[@]}" --epochs 1 --shard zero3 --out "$TMP/z3r" -q
expect_rc 0 "zero3, epoch 1"
run train-pa --resume "$TMP/z3r" --epochs 2 -q
expect_rc 0 "resume the zero3 run on one process ($ERR)"
same_metrics "$(ev "$TMP/z3r")" "$REF" "zero3 (2 ranks) -> none (1 process) resume"
mrun 3 train-pa --resume "$TMP/zero1" --epochs 3 --shard zero2 -q
expect_rc 0 "resume a zero1 run on 3 ranks with zero2 ($ERR)"

# ---- a memory budget: fails on one process, fits with zero3 on 4 ranks (one process:
# 23.2 MiB of arenas since the blocks' im2col buffers are in the stage scratch and the
# evaluation streams its segments; 29.4 MiB before, with the buffers outside the arenas)
BIG=(--model resnet --hidden 192 --layers 8 --kernel 3 --frame 32 --stride 160 --batch 8 --eval-batch 1 --epochs 1
    --no-test --no-report --mem-limit-mb 20)
run train-pa --data "$D" "${BIG[@]}" --out "$TMP/big1" -q
expect_rc 1 "20 MiB budget, one process"
has "$ERR" "memory budget exceeded" "budget message"
has "$ERR" "--mem-limit-mb" "budget message names the option"
has "$ERR" "MiB" "budget message gives the sizes"
mrun 4 train-pa --data "$D" "${BIG[@]}" --shard zero3 --out "$TMP/big4" -q
expect_rc 0 "20 MiB budget, zero3 on 4 ranks ($ERR)"
PB=$(cat "$TMP/big4/parallel.json")
tot=$(awk -v a="$(json_num "$PB" params_bytes)" -v b="$(json_num "$PB" grads_bytes)" -v c="$(json_num "$PB" optim_bytes)" \
    -v d="$(json_num "$PB" activations_bytes)" 'BEGIN { print a + b + c + d }')
if awk -v t="$tot" 'BEGIN { exit !(t <= 20 * 1048576) }'; then pass; else fail "zero3 on 4 ranks: arenas $tot bytes above 20 MiB"; fi

# ---- usage errors
run train-pa --data "$D" "${SMALL[@]}" --shard zero9 --out "$TMP/x"
expect_rc 2 "--shard zero9"
has "$ERR" "--shard: sharding mode 'zero9'" "bad mode named"
run train-pa --data "$D" "${SMALL[@]}" --shard zero2 --compress int8 --out "$TMP/x"
expect_rc 2 "--compress with zero2"
has "$ERR" "--compress works with --shard none or zero1" "compress with zero2 refused"
run train-pa --data "$D" "${SMALL[@]}" --mem-limit-mb 0 --out "$TMP/x"
expect_rc 2 "--mem-limit-mb 0"
has "$ERR" "--mem-limit-mb" "bad limit named"
finish
