#!/bin/bash
# Threads inside a rank (train-pa --threads N, docs/performance.md "Threads inside a
# rank"): 2 and 3 threads give one thread's metrics.jsonl bit for bit (every loss and
# metric, timing keys aside), at the default SIMD level and at DD_SIMD=avx2, and so do
# 2 threads for a tcn (threaded depthwise convolutions) and for lstm, resnet, dgru and
# hammerstein (a batch of 80 frames: 3 batch chunks on 2 threads); 2 ranks of
# 1 thread equal 1 rank of 2 threads to float rounding (data-parallel sums differ in the
# last bits, as for any rank count); a large model (no batch chunks) with --threads 2
# gives OpenBLAS 2 threads unless OPENBLAS_NUM_THREADS is set; --threads out of range is
# a usage error; --help documents it.
set -euo pipefail
source "$(dirname "$0")/common.bash"

D=$TMP/sim
run simulate --out "$D" --samples 12000 --pa wiener-hammerstein -q
expect_rc 0 "simulate"
# 40 frames of 40 samples per batch: 3 AVX-512 / 5 AVX2 vectors of frames to split
SMALL=(--model gru --hidden 23 --frame 40 --stride 4 --batch 40 --lr 5e-3 --epochs 2 -q)

# same_run DIR1 DIR2 WHAT: the two runs' metrics.jsonl agree bit for bit (timing keys aside)
same_run() {
    if cmp -s <(untimed "$1/metrics.jsonl") <(untimed "$2/metrics.jsonl"); then
        pass
    else
        fail "$3: metrics.jsonl differs from --threads 1"
        diff <(untimed "$1/metrics.jsonl") <(untimed "$2/metrics.jsonl") | head -4
    fi
}

for simd in "" avx2; do
    for nt in 1 2 3; do
        DD_SIMD=$simd run train-pa --data "$D" "${SMALL[@]}" --threads "$nt" --out "$TMP/t${simd}_$nt"
        expect_rc 0 "train-pa --threads $nt ${simd:+(DD_SIMD=$simd)}"
    done
    for nt in 2 3; do
        same_run "$TMP/t${simd}_1" "$TMP/t${simd}_$nt" "--threads $nt ${simd:+(DD_SIMD=$simd)}"
    done
done
has "$(cat "$TMP/t_1/metrics.jsonl")" '"train_loss"' "metrics.jsonl has the losses compared"

# tcn: depthwise convolutions threaded (frames; dW by channels), 1600 rows x 96 channels
TCN=(--model tcn --frame 40 --stride 8 --batch 40 --lr 1e-3 --epochs 1 -q)
for nt in 1 2; do
    run train-pa --data "$D" "${TCN[@]}" --threads "$nt" --out "$TMP/tcn_$nt"
    expect_rc 0 "train-pa tcn --threads $nt"
done
same_run "$TMP/tcn_1" "$TMP/tcn_2" "tcn --threads 2"

# batch chunks (80 frames: 3 chunks of 27, 27, 26) of the other model kinds run
# concurrently on 2 threads (OpenBLAS LSTM steps, im2col convolutions, dense stacks):
# metrics.jsonl identical to one thread
for m in lstm resnet dgru hammerstein; do
    for nt in 1 2; do
        run train-pa --data "$D" --model "$m" --frame 40 --stride 8 --batch 80 --lr 1e-3 --epochs 1 -q \
            --threads "$nt" --out "$TMP/${m}_$nt"
        expect_rc 0 "train-pa $m --threads $nt"
    done
    same_run "$TMP/${m}_1" "$TMP/${m}_2" "$m --threads 2 (batch chunks)"
done

# a large model (resnet 256 x 8: 2.1 M floats) on slices of 4 frames (no batch chunks):
# --threads also gives OpenBLAS N threads for its sgemm calls unless OPENBLAS_NUM_THREADS
# is set. With OPENBLAS_NUM_THREADS=1 (ctest's) 1 and 2 threads agree bit for bit; with
# OpenBLAS's own threads bit for bit where docs/performance.md says so (OpenBLAS's
# SkylakeX kernel: every K of these sgemm calls, 768, 256 and 800, is a multiple of 32),
# else to float rounding.
BIG=(--data "$D" --model resnet --hidden 256 --layers 8 --frame 200 --stride 800 --batch 4 --lr 1e-3 --epochs 1
    --progress none -v)
for nt in 1 2; do
    run train-pa "${BIG[@]}" --threads "$nt" --out "$TMP/big_$nt"
    expect_rc 0 "train-pa resnet 256 x 8 --threads $nt (OPENBLAS_NUM_THREADS=1)"
    has "$ERR" "$nt thread(s) per rank, OpenBLAS 1 thread(s)" "OPENBLAS_NUM_THREADS=1 wins over --threads $nt"
    OPENBLAS_NUM_THREADS='' run train-pa "${BIG[@]}" --threads "$nt" --out "$TMP/bigb_$nt"
    expect_rc 0 "train-pa resnet 256 x 8 --threads $nt (OpenBLAS's threads)"
    has "$ERR" "$nt thread(s) per rank, OpenBLAS $nt thread(s)" "--threads $nt gives OpenBLAS $nt threads"
done
same_run "$TMP/big_1" "$TMP/big_2" "resnet 256 x 8 --threads 2, OPENBLAS_NUM_THREADS=1"
if grep -q '"blas_core":[[:space:]]*"SkylakeX"' "$TMP/bigb_2/config.json"; then
    same_run "$TMP/bigb_1" "$TMP/bigb_2" "resnet 256 x 8 --threads 2, OpenBLAS SkylakeX 2 threads"
else
    same_metrics "$(ev "$TMP/bigb_1")" "$(ev "$TMP/bigb_2")" "resnet 256 x 8 --threads 2, OpenBLAS 2 threads"
fi

# hybrid: 2 ranks x 1 thread against 1 rank x 2 threads
if command -v mpirun >/dev/null 2>&1; then
    mpi_setup
    mrun 2 train-pa --data "$D" "${SMALL[@]}" --threads 1 --out "$TMP/mpi2"
    expect_rc 0 "mpirun -np 2 train-pa --threads 1"
    same_metrics "$(ev "$TMP/t_2")" "$(ev "$TMP/mpi2")" "2 ranks x 1 thread vs 1 rank x 2 threads"
fi

run train-pa --data "$D" "${SMALL[@]}" --threads 0 --out "$TMP/bad"
expect_rc 2 "--threads 0"
has "$ERR" "--threads" "the usage error names --threads"
run train-pa --help
has "$OUT" "--threads N" "--help documents --threads"
finish
