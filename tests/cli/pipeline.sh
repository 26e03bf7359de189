#!/bin/bash
# Model parallelism through the command line (mpirun -np N distdpd train-pa --pp P --tp T)
# on a tiny simulated data set: 1f1b at 2 ranks, gpipe at 2 pipeline ranks x 2 replicas,
# interleaved at 2 ranks, tensor parallelism at 2 ranks and tp 2 x pp 2 at 4 equal one
# process (eval of last.ckpt within 0.01 dB, val loss
# 1e-5 relative); the split is printed before training and recorded in parallel.json
# with the bubble (measured and by the formula); train-dpd pipelines the DPD and the
# frozen PA model; a checkpoint written under the pipeline resumes on one process and
# equals the straight run; usage and layout errors exit 2 or 1 with the option named.
set -euo pipefail
source "$(dirname "$0")/common.bash"

mpi_setup

small_sim # D=$TMP/sim: 12,000 samples, Wiener-Hammerstein PA
SMALL=(--model resnet --hidden 8 --layers 6 --kernel 2 --frame 32 --stride 4 --batch 30 --lr 2e-2 --no-report)

run train-pa --data "$D" "${SMALL[@]}" --epochs 2 --out "$TMP/one" -q
expect_rc 0 "train-pa, one process"
REF=$(ev "$TMP/one")

# ---- 1f1b on 2 ranks: the split before training, the summary, parallel.json
mrun 2 train-pa --data "$D" "${SMALL[@]}" --epochs 2 --pp 2 --micro 3 --out "$TMP/p2" --progress lines
expect_rc 0 "--pp 2 ($ERR)"
has "$ERR" "parallel:   tp 1 x pp 2 x dp 1; pipeline schedule 1f1b, 3 micro-batches" "the layout is printed"
has "$ERR" "pipeline rank 0: stages 0-" "rank 0's stages are printed"
has "$ERR" "pipeline rank 1: stages " "rank 1's stages are printed"
has "$OUT" "2 ranks = tp 1 x pp 2 x dp 1 (1f1b, 3 micro-batches)" "summary line"
same_metrics "$(ev "$TMP/p2")" "$REF" "--pp 2 1f1b vs one process"
PJ=$(cat "$TMP/p2/parallel.json")
has "$PJ" '"strategy":	"model-parallel (tensor x pipeline, with data-parallel replicas)"' "parallel.json: strategy"
has "$PJ" '"schedule":	"1f1b"' "parallel.json: schedule"
near "$(json_num "$PJ" bubble_formula)" 0.25 1e-9 "parallel.json: bubble by the formula (P-1)/(M+P-1)"
B=$(json_num "$PJ" bubble_measured_last_epoch)
if [ -n "$B" ] && awk -v b="$B" 'BEGIN { exit !(b > 0 && b < 1) }'; then pass; else fail "measured bubble '$B'"; fi
[ "$(grep -c '^[0-9]' "$TMP/p2/dp_steps.csv")" -gt 0 ] && pass || fail "dp_steps.csv has the steps"

# ---- 2 pipeline ranks x 2 replicas, gpipe; interleaved on 2 ranks
mrun 4 train-pa --data "$D" "${SMALL[@]}" --epochs 2 --pp 2 --micro 2 --schedule gpipe --out "$TMP/p22" --progress none
expect_rc 0 "--pp 2 on 4 ranks ($ERR)"
has "$OUT" "4 ranks = tp 1 x pp 2 x dp 2" "2 x 2 summary"
same_metrics "$(ev "$TMP/p22")" "$REF" "--pp 2 x 2 replicas, gpipe vs one process"
mrun 2 train-pa --data "$D" "${SMALL[@]}" --epochs 2 --pp 2 --micro 4 --schedule interleaved --virtual 2 \
    --out "$TMP/pi" --progress none
expect_rc 0 "--schedule interleaved ($ERR)"
same_metrics "$(ev "$TMP/pi")" "$REF" "interleaved vs one process"

# ---- tensor parallelism: tp 2 on 2 ranks, and the README's tp 2 x pp 2 on 4
mrun 2 train-pa --data "$D" "${SMALL[@]}" --epochs 2 --tp 2 --out "$TMP/t2" --progress none
expect_rc 0 "--tp 2 ($ERR)"
has "$OUT" "2 ranks = tp 2 x pp 1 x dp 1" "tp summary line"
has "$OUT" "tensor:     " "tensor-parallel collectives line"
same_metrics "$(ev "$TMP/t2")" "$REF" "--tp 2 vs one process"
TJ=$(cat "$TMP/t2/parallel.json")
has "$TJ" '"tensor_parallel":' "parallel.json: tensor_parallel"
has "$TJ" '"tp":	2' "parallel.json: tp"
mrun 4 train-pa --data "$D" "${SMALL[@]}" --epochs 2 --tp 2 --pp 2 --out "$TMP/t2p2" --progress lines
expect_rc 0 "--tp 2 --pp 2 ($ERR)"
has "$ERR" "tensor-parallel groups within a node, pipelines within a node" "the grid is printed"
same_metrics "$(ev "$TMP/t2p2")" "$REF" "--tp 2 --pp 2 vs one process"
mrun 2 train-pa --data "$D" --model gmp --frame 32 --stride 16 --epochs 1 --tp 2 --no-report --out "$TMP/x"
expect_rc 1 "--tp with a model without a tensor-parallel form"
has "$ERR" "model gmp has no tensor-parallel form" "gmp --tp: message"
mrun 2 train-pa --data "$D" --model resnet --hidden 7 --frame 32 --stride 16 --epochs 1 --tp 2 --no-report --out "$TMP/x"
expect_rc 1 "--tp not dividing the width"
has "$ERR" "resnet --hidden 7 is not divisible by --tp 2" "indivisible width: message"
mrun 2 train-pa --data "$D" "${SMALL[@]}" --tp 3 --out "$TMP/x"
expect_rc 1 "--tp 3 on 2 ranks"
has "$ERR" "--tp 3 x --pp 1 = 3 does not divide the 2 ranks" "--tp not dividing the ranks: message"

# ---- a pipeline checkpoint resumes on one process: = the straight run
mrun 2 train-pa --data "$D" "${SMALL[@]}" --epochs 1 --pp 2 --out "$TMP/half" --progress none
expect_rc 0 "first epoch under the pipeline ($ERR)"
run train-pa --resume "$TMP/half" --epochs 2 -q
expect_rc 0 "second epoch on one process ($ERR)"
same_metrics "$(ev "$TMP/half")" "$REF" "pipeline epoch 1 + one-process epoch 2 vs straight"

# ---- the grid's data-parallel dimension: --shard zero1 and --compress (issue 12)
mrun 4 train-pa --data "$D" "${SMALL[@]}" --epochs 1 --pp 2 --shard zero1 --out "$TMP/z1" --progress none
expect_rc 0 "--pp 2 --shard zero1 on 4 ranks ($ERR)"
has "$(cat "$TMP/z1/parallel.json")" '"shard":	"zero1"' "parallel.json: shard zero1 on the grid"
run train-pa --resume "$TMP/z1" --epochs 2 -q
expect_rc 0 "--pp 2 zero1 epoch 1, one process epoch 2 ($ERR)"
same_metrics "$(ev "$TMP/z1")" "$REF" "--pp 2 zero1 + one-process epoch 2 vs straight"
run train-pa --data "$D" "${SMALL[@]}" --epochs 1 --out "$TMP/z1b" -q
expect_rc 0 "one process, epoch 1"
mrun 4 train-pa --resume "$TMP/z1b" --epochs 2 --tp 2 --shard zero1 --progress none
expect_rc 0 "one process epoch 1, --tp 2 zero1 epoch 2 ($ERR)"
same_metrics "$(ev "$TMP/z1b")" "$REF" "one process + --tp 2 zero1 vs straight"
mrun 4 train-pa --data "$D" "${SMALL[@]}" --epochs 2 --tp 2 --compress fp32 --out "$TMP/tc" --progress none
expect_rc 0 "--tp 2 --compress fp32 on 4 ranks ($ERR)"
same_metrics "$(ev "$TMP/tc")" "$REF" "--tp 2 x 2 replicas with fp32 compression vs one process"
mrun 4 train-pa --data "$D" "${SMALL[@]}" --epochs 1 --pp 2 --compress int8 --out "$TMP/pc" --progress lines
expect_rc 0 "--pp 2 --compress int8 on 4 ranks ($ERR)"
has "$OUT" "compression: int8 with error feedback" "compression summary line on the grid"
R=$(json_num "$(tail -1 "$TMP/pc/metrics.jsonl")" compression_ratio)
near "$R" 3.94 0.05 "metrics.jsonl: compression_ratio of int8 on the grid"
mrun 2 train-pa --resume "$TMP/pc" --epochs 2 --pp 2 --progress none -v
expect_rc 0 "int8 on pp 2 x dp 2 resumed on pp 2 x dp 1 ($ERR)"
has "$ERR" "compression state written by 2 replicas, resuming with 1: each gets their mean" "residuals N -> M replicas"
has "$(cat "$TMP/pc/parallel.json")" '"compress":	"int8' "the resumed run kept the recorded compressor"

# ---- train-dpd: the DPD's stages and the frozen PA model's in one pipeline
run train-dpd --data "$D" --pa-run "$TMP/one" --model gru --hidden 5 --layers 2 --frame 32 --stride 8 --batch 30 \
    --epochs 1 --no-report --out "$TMP/dpd1" -q
expect_rc 0 "train-dpd, one process"
mrun 3 train-dpd --data "$D" --pa-run "$TMP/one" --model gru --hidden 5 --layers 2 --frame 32 --stride 8 --batch 30 \
    --epochs 1 --no-report --pp 3 --pp-split 2,3,6 --out "$TMP/dpd3" --progress lines
expect_rc 0 "train-dpd --pp 3 ($ERR)"
has "$ERR" "PA " "the PA model's stages are in the split"
same_metrics "$(ev "$TMP/dpd3")" "$(ev "$TMP/dpd1")" "train-dpd --pp 3 vs one process"

# ---- train-dpd under tensor parallelism, with the true PA and the report (rank 0 turns
# to the whole model for report.html)
DPD6=(--pa-run "$TMP/one" --model gru --hidden 6 --layers 2 --frame 32 --stride 8 --batch 30 --epochs 1)
run train-dpd --data "$D" "${DPD6[@]}" --out "$TMP/dpd6" -q
expect_rc 0 "train-dpd hidden 6, one process"
mrun 2 train-dpd --data "$D" "${DPD6[@]}" --tp 2 --out "$TMP/dpd6t" --progress none
expect_rc 0 "train-dpd --tp 2 with the report ($ERR)"
has "$OUT" "true PA:    with the DPD" "train-dpd --tp 2: the true PA line"
[ -s "$TMP/dpd6t/report.html" ] && pass || fail "train-dpd --tp 2: report.html"
same_metrics "$(ev "$TMP/dpd6t")" "$(ev "$TMP/dpd6")" "train-dpd --tp 2 vs one process"

# ---- errors
run train-pa --data "$D" "${SMALL[@]}" --micro 4 --out "$TMP/x"
expect_rc 2 "--micro without --pp"
has "$ERR" "--micro needs --pp P" "--micro without --pp: message"
run train-pa --data "$D" "${SMALL[@]}" --pp 2 --schedule zigzag --out "$TMP/x"
expect_rc 2 "bad schedule"
has "$ERR" "unknown pipeline schedule 'zigzag'" "bad schedule: message"
run train-pa --data "$D" "${SMALL[@]}" --pp 2 --virtual 2 --out "$TMP/x"
expect_rc 2 "--virtual without interleaved"
has "$ERR" "--virtual 2 needs --schedule interleaved" "--virtual: message"
run train-pa --data "$D" "${SMALL[@]}" --pp 2 --shard zero2 --out "$TMP/x"
expect_rc 2 "--shard zero2 with --pp"
has "$ERR" "--shard zero2 does not apply to a model-parallel grid" "--shard zero2 on the grid: message"
run train-pa --data "$D" "${SMALL[@]}" --tp 2 --shard zero3 --out "$TMP/x"
expect_rc 2 "--shard zero3 with --tp"
has "$ERR" "--shard zero3 does not apply to a model-parallel grid" "--shard zero3 on the grid: message"
run train-pa --data "$D" "${SMALL[@]}" --pp 2 --compress bogus --out "$TMP/x"
expect_rc 2 "--compress bogus with --pp"
has "$ERR" "--compress" "--compress on the grid: the option is named"
run train-pa --data "$D" "${SMALL[@]}" --pp 2 --bucket-mb 8 --out "$TMP/x"
expect_rc 2 "--bucket-mb with --pp"
has "$ERR" "--bucket-mb does not apply to model-parallel" "--bucket-mb: message"
mrun 3 train-pa --data "$D" "${SMALL[@]}" --pp 2 --out "$TMP/x"
expect_rc 1 "--pp 2 on 3 ranks"
has "$ERR" "--pp 2 does not divide the 3 ranks" "--pp not dividing: message"
mrun 2 train-pa --data "$D" --model hammerstein --hidden 4 --layers 1 --frame 32 --stride 16 --epochs 1 --pp 2 \
    --no-report --out "$TMP/x"
expect_rc 1 "more pipeline ranks than stages"
has "$ERR" "cannot split 1 stages into 2 pipeline groups" "too few stages: message"
mrun 2 train-pa --data "$D" "${SMALL[@]}" --pp 2 --pp-split 3,3 --out "$TMP/x"
expect_rc 1 "--pp-split not summing to the stages"
has "$ERR" "--pp-split: sum 6 is not the model's 8 stages" "--pp-split: message"

run strategies
expect_rc 0 "strategies"
has "$OUT" "model-parallel" "strategies lists the model-parallel strategy"

finish
