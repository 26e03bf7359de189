#!/bin/bash
# Threads inside a rank (train-pa --threads N, docs/performance.md "Threads inside a
# rank"): 2 and 3 threads give one thread's metrics.jsonl bit for bit (every loss and
# metric, timing keys aside), at the default SIMD level and at DD_SIMD=avx2, and so do
# 2 threads for a tcn (threaded depthwise convolutions) and for lstm, resnet, dgru and
# hammerstein (a batch of 80 frames: 3 batch chunks on 2 threads); 2 ranks of
# 1 thread equal 1 rank of 2 threads to float rounding (data-parallel sums differ in the
# last bits, as for any rank count); a large model (no batch chunks) gives one thread's
# bits at 2 threads (its sgemm calls in panels) on OpenBLAS's SkylakeX and Haswell
# kernels; --threads out of range is a usage error; --help documents it.
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
# --threads puts OpenBLAS on one thread and cuts its large sgemm calls into panels (by
# shape, never by the thread count) run on the threads, so 1 and 2 threads agree bit for
# bit without OPENBLAS_NUM_THREADS, on OpenBLAS's SkylakeX kernel (AVX-512) and on its
# Haswell kernel (AVX2: where OpenBLAS's own threads differed on every threaded call),
# each where this CPU can run it; and with ctest's OPENBLAS_NUM_THREADS=1. OpenBLAS's own
# threads (OPENBLAS_NUM_THREADS=2, the opt-in) stay within float rounding.
BIG=(--data "$D" --model resnet --hidden 256 --layers 8 --frame 200 --stride 800 --batch 4 --lr 1e-3 --epochs 1
    --progress none -v)
cores=()
grep -qw avx512f /proc/cpuinfo && cores+=(SkylakeX)
grep -qw avx2 /proc/cpuinfo && cores+=(Haswell)
for core in "${cores[@]}"; do
    for nt in 1 2; do
        OPENBLAS_NUM_THREADS='' OPENBLAS_CORETYPE=$core run train-pa "${BIG[@]}" --threads "$nt" --out "$TMP/big${core}_$nt"
        expect_rc 0 "train-pa resnet 256 x 8 --threads $nt (OpenBLAS $core, OPENBLAS_NUM_THREADS unset)"
        has "$ERR" "$nt thread(s) per rank, OpenBLAS 1 thread(s), large products in up to 2 panels" \
            "--threads $nt: OpenBLAS on one thread, the products in panels"
    done
    if grep -q "\"blas_core\":[[:space:]]*\"$core\"" "$TMP/big${core}_2/config.json"; then pass; else
        fail "OPENBLAS_CORETYPE=$core did not take effect (config.json's blas_core)"
    fi
    same_run "$TMP/big${core}_1" "$TMP/big${core}_2" "resnet 256 x 8 --threads 2, OpenBLAS $core"
done
run train-pa "${BIG[@]}" --threads 2 --out "$TMP/big_2"
expect_rc 0 "train-pa resnet 256 x 8 --threads 2 (OPENBLAS_NUM_THREADS=1)"
has "$ERR" "2 thread(s) per rank, OpenBLAS 1 thread(s), large products in up to 2 panels" "OPENBLAS_NUM_THREADS=1"
# against the forced run of the kernel this run got (OpenBLAS's own pick, or the
# environment's OPENBLAS_CORETYPE: some machines set it)
got=$(sed -n 's/.*"blas_core":[[:space:]]*"\([^"]*\)".*/\1/p' "$TMP/big_2/config.json" | head -n 1)
if [ -d "$TMP/big${got}_1" ]; then
    same_run "$TMP/big${got}_1" "$TMP/big_2" "resnet 256 x 8 --threads 2, OPENBLAS_NUM_THREADS=1 (OpenBLAS $got)"
else
    echo "note: OpenBLAS runs its '$got' kernel here, none of the forced ones (${cores[*]}): no comparison"
fi
OPENBLAS_NUM_THREADS=2 run train-pa "${BIG[@]}" --threads 2 --out "$TMP/bigb_2"
expect_rc 0 "train-pa resnet 256 x 8 --threads 2 (OPENBLAS_NUM_THREADS=2)"
has "$ERR" "2 thread(s) per rank, OpenBLAS 2 thread(s) of its own" "OPENBLAS_NUM_THREADS=2 wins over --threads"
same_metrics "$(ev "$TMP/big_2")" "$(ev "$TMP/bigb_2")" "resnet 256 x 8 on OpenBLAS's own 2 threads"

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
