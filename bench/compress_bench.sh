#!/bin/bash
# Gradient compression benchmark (issue 6): test NMSE after a fixed number of epochs
# against compression ratio, for every compressor, on the OpenDPD reference recipe (gru,
# hidden 23) and on dgru (its defaults), both with frame 200, stride 1, global batch 64,
# AdamW lr 5e-3, seed 0, trained data-parallel with mpirun at 2 and 4 ranks on
# DPA_200MHz and on a simulated campaign of the same size (distdpd simulate, default
# realistic PA, 38,400 samples = DPA_200MHz's 23,040 / 7,680 / 7,680 split).
# A benchmark, run by hand, not a timed test. docs/compress_bench.md explains the output.
#
# usage: [KNOB=value ...] bench/compress_bench.sh [DISTDPD]
#   DISTDPD      the command (default build/distdpd)
# knobs (environment):
#   EPOCHS       epochs per run (default 5, a quick pass; the reference recipe is 20)
#   RANKS        numbers of MPI ranks (default "2 4"; 1 runs one process without mpirun:
#                the compression error alone)
#   MODELS       "gru dgru" (default)
#   DATASETS     "dpa sim" (default); dpa is skipped with a message when
#                DPA_DIR (default ../shared/data/opendpd/DPA_200MHz) is absent
#   COMPRESSORS  labels below (default: all), or any --compress spec (used as its label)
#   OUT          output directory (default: DIR_OF_DISTDPD/compress-bench); runs that
#                already completed there are reused (rerun with the same OUT to resume
#                or to add compressors), OUT/results.csv and OUT/results.md are rebuilt
#   SIM_SAMPLES  simulated campaign length (default 38400)
#   DGC_WARMUP   dgc's density warm-up in epochs (default 1; the library's default is 4,
#                which at EPOCHS=5 would leave one epoch at the final density)
#   ALLREDUCE    --allreduce for the dense baseline (default ring)
#   SGD_LR       learning rate of the sgd-* labels (default 0.05; 0.1 diverges with dgc)
#   SEEDS        --seed values (default "0"); with several, every run is repeated per
#                seed (directories get _s<seed>) and results.md shows means over the seeds
#                (deltas against `none` of the same seed)
#   EXTRA        more train-pa arguments for every run (default none)
#   TIMEOUT      seconds per run before it is killed (default 3600)
#   YIELD        Open MPI mpi_yield_when_idle (default 1): the compressors' collectives
#                block inside MPI, and Open MPI busy-polls there when it does not see the
#                node as oversubscribed (2 ranks on 2 cores); with other jobs on the
#                machine the polling rank steals the core of the rank it waits for (5-10x
#                slower epochs measured); 1 makes waiting ranks yield, as the dense path's
#                own polling loop does. YIELD= (empty) leaves Open MPI's default
# labels (--compress spec):
#   none fp32 fp16 bf16 int8 int8-sr (int8,stochastic=1) int4 sign
#   topk (topk,density=0.01) topk-sampled (topk,density=0.01,sampled=1)
#   randk (randk,density=0.01) powersgd-r1 powersgd-r2 powersgd-r4 (powersgd,rank=R)
#   dgc-0.001 dgc-0.0037 (dgc,density=D,warmup=DGC_WARMUP)
#   dgc-0.001-m0 (the same, momentum=0: AdamW already keeps a momentum)
#   int4-noef topk-noef sign-noef (the same with --error-feedback off)
#   sgd-LABEL    LABEL (any of the above, or a spec) trained with SGD instead of AdamW:
#                --opt sgd --lr SGD_LR --momentum 0.9, or --momentum 0 for dgc (its momentum
#                correction is the momentum, as DGC intends); compared with sgd-none.
#                Not in the default list: COMPRESSORS="sgd-none sgd-dgc-0.001 ..."
# Output: OUT/runs/<model>_<data>_np<ranks>_<label>[_s<seed>]/ (run directory + train.log),
# OUT/runs.tsv (one line per finished run), OUT/results.csv (one row per run, deltas vs
# `none` at the same model/data/ranks/epochs) and OUT/results.md (bench/compress_table.py).
# The machine's CPU count and load average go into OUT/env.txt (one block per invocation,
# appended; results.md starts with it): with more ranks than free
# cores the ranks are oversubscribed and the times mean little.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
DD=$(realpath "${1:-build/distdpd}")
[ -x "$DD" ] || { echo "bench/compress_bench.sh: $DD is not an executable (build it first)" >&2; exit 1; }
EPOCHS=${EPOCHS:-5}
RANKS=${RANKS:-"2 4"}
MODELS=${MODELS:-"gru dgru"}
DATASETS=${DATASETS:-"dpa sim"}
ALL_LABELS="none fp32 fp16 bf16 int8 int8-sr int4 sign topk topk-sampled randk powersgd-r1 powersgd-r2 powersgd-r4 dgc-0.001 dgc-0.0037 dgc-0.001-m0 int4-noef topk-noef sign-noef"
COMPRESSORS=${COMPRESSORS:-$ALL_LABELS}
OUT=${OUT:-$(dirname "$DD")/compress-bench}
SIM_SAMPLES=${SIM_SAMPLES:-38400}
DGC_WARMUP=${DGC_WARMUP:-1}
ALLREDUCE=${ALLREDUCE:-ring}
SGD_LR=${SGD_LR:-0.05}
EXTRA=${EXTRA:-}
SEEDS=${SEEDS:-0}
TIMEOUT=${TIMEOUT:-3600}
DPA=${DPA_DIR:-$SRC/../shared/data/opendpd/DPA_200MHz}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1
YIELD=${YIELD-1}
[ -z "$YIELD" ] || export OMPI_MCA_mpi_yield_when_idle=$YIELD

mkdir -p "$OUT/runs" "$OUT/data"
OUT=$(realpath "$OUT")

# spec_of LABEL: the --compress spec (and extra flags) of a label; an unknown label is
# taken as a spec itself
spec_of() {
    case $1 in
    sgd-dgc*) echo "$(spec_of "${1#sgd-}") --opt sgd --lr $SGD_LR --momentum 0" ;;
    sgd-*) echo "$(spec_of "${1#sgd-}") --opt sgd --lr $SGD_LR --momentum 0.9" ;;
    int8-sr) echo "int8,stochastic=1" ;;
    topk) echo "topk,density=0.01" ;;
    topk-sampled) echo "topk,density=0.01,sampled=1" ;;
    randk) echo "randk,density=0.01" ;;
    powersgd-r[0-9]*) echo "powersgd,rank=${1#powersgd-r}" ;;
    dgc-*-m0) local d=${1#dgc-}; echo "dgc,density=${d%-m0},warmup=$DGC_WARMUP,momentum=0" ;;
    dgc-*) echo "dgc,density=${1#dgc-},warmup=$DGC_WARMUP" ;;
    int4-noef) echo "int4 --error-feedback off" ;;
    topk-noef) echo "topk,density=0.01 --error-feedback off" ;;
    sign-noef) echo "sign --error-feedback off" ;;
    *) echo "$1" ;;
    esac
}
model_args() {
    case $1 in
    gru) echo "--model gru --hidden 23" ;;
    *) echo "--model $1" ;;
    esac
}
# a label usable as a file name
fname() { tr -c 'A-Za-z0-9._=-' '_' <<<"$1" | sed 's/_$//'; }

{
    echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
    echo "mpirun: $(mpirun --version 2>/dev/null | head -n 1)"
    echo "distdpd: $DD"
    echo "epochs: $EPOCHS; ranks: $RANKS; models: $MODELS; data: $DATASETS; dgc warm-up: $DGC_WARMUP epoch(s); seeds: $SEEDS; allreduce: $ALLREDUCE; mpi_yield_when_idle: ${YIELD:-default}"
    echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/env.new"
cat "$OUT/env.new" >>"$OUT/env.txt" # every invocation appends its own block
cat "$OUT/env.new"
rm -f "$OUT/env.new"
for np in $RANKS; do
    if [ "$np" -gt "$(nproc)" ]; then
        echo "note: $np ranks on $(nproc) CPUs: oversubscribed, times are not meaningful" | tee -a "$OUT/env.txt"
    fi
done

# data sets: name -> directory
declare -A DATA=()
for d in $DATASETS; do
    case $d in
    dpa)
        if [ -f "$DPA/spec.json" ]; then
            DATA[dpa]=$(realpath "$DPA")
        else
            echo "SKIP dpa: $DPA not found" | tee -a "$OUT/env.txt"
        fi
        ;;
    sim)
        if [ ! -f "$OUT/data/sim/spec.json" ]; then
            "$DD" simulate --out "$OUT/data/sim" --samples "$SIM_SAMPLES" -q
        fi
        DATA[sim]=$OUT/data/sim
        ;;
    *) echo "bench/compress_bench.sh: unknown data set '$d' (dpa or sim)" >&2; exit 2 ;;
    esac
done

# none (and sgd-none) first in every group (the references of the deltas)
LABELS=""
for c in $COMPRESSORS; do [ "$c" = none ] && LABELS="none"; done
for c in $COMPRESSORS; do [ "$c" = sgd-none ] && LABELS="$LABELS sgd-none"; done
for c in $COMPRESSORS; do [ "$c" = none ] || [ "$c" = sgd-none ] || LABELS="$LABELS $c"; done

nlines() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }
total=0
for d in $DATASETS; do [ -n "${DATA[$d]:-}" ] && total=$((total + $(wc -w <<<"$MODELS") * $(wc -w <<<"$RANKS") * $(wc -w <<<"$LABELS") * $(wc -w <<<"$SEEDS"))); done
n=0
failed=0
for d in $DATASETS; do
    [ -n "${DATA[$d]:-}" ] || continue
    for m in $MODELS; do
        for np in $RANKS; do
            for label in $LABELS; do
                for seed in $SEEDS; do
                    n=$((n + 1))
                    full=$(spec_of "$label")
                    spec=${full%% *}
                    flags=""
                    [ "$full" = "$spec" ] || flags=${full#* }
                    name=${m}_${d}_np${np}_$(fname "$label")
                    [ "$seed" = 0 ] || name=${name}_s$seed
                    run=$OUT/runs/$name
                    if [ -f "$run.done" ] && [ "$(nlines "$run/metrics.jsonl")" -eq "$EPOCHS" ]; then
                        echo "[$n/$total] $name: done before, kept"
                        continue
                    fi
                    rm -rf "$run" "$run.done"
                    mkdir -p "$run.tmp"
                    # shellcheck disable=SC2046,SC2086
                    cmd=("$DD" train-pa --data "${DATA[$d]}" $(model_args "$m") --frame 200 --stride 1 --batch 64
                        --lr 5e-3 --opt adamw --seed "$seed" --epochs "$EPOCHS" --no-report -q
                        --compress "$spec" $flags $EXTRA --out "$run")
                    if [ "$np" -gt 1 ]; then
                        cmd=(mpirun -np "$np" --bind-to none "${cmd[@]}" --allreduce "$ALLREDUCE")
                    fi
                    printf '[%d/%d] %s: %s ... ' "$n" "$total" "$name" "$full"
                    t0=$(date +%s.%N)
                    set +e
                    timeout "$TIMEOUT" "${cmd[@]}" >"$run.tmp/train.log" 2>&1
                    rc=$?
                    set -e
                    t1=$(date +%s.%N)
                    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
                    if [ -d "$run" ]; then mv "$run.tmp/train.log" "$run/train.log"; rmdir "$run.tmp"; else mv "$run.tmp" "$run"; fi
                    if [ "$rc" -eq 0 ] && [ "$(nlines "$run/metrics.jsonl")" -eq "$EPOCHS" ]; then
                        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$m" "$d" "$np" "$label" "$full" "$EPOCHS" "$wall" "$rc" \
                            "runs/$name" "$seed" >>"$OUT/runs.tsv"
                        : >"$run.done"
                        echo "$(awk -v w="$wall" 'BEGIN { printf "%.1f s", w }'), test NMSE" \
                            "$(grep -o '"test_nmse_db":[-0-9.eE+]*' "$run/metrics.jsonl" | tail -n 1 | sed 's/.*://') dB"
                    else
                        failed=$((failed + 1))
                        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$m" "$d" "$np" "$label" "$full" "$EPOCHS" "$wall" "$rc" \
                            "runs/$name" "$seed" >>"$OUT/runs.tsv"
                        echo "FAILED (exit $rc): $(tail -n 3 "$run/train.log" | tr '\n' ' ')"
                    fi
                done
            done
        done
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/env.txt"
if [ ! -s "$OUT/runs.tsv" ]; then
    echo "SKIP: nothing to run (no data set available)"
    exit 77
fi
"$PY" "$SRC/bench/compress_table.py" "$OUT"
echo "results: $OUT/results.csv, $OUT/results.md"
[ "$failed" -eq 0 ]
