#!/bin/bash
# Every DPD result carries its baseline, the same PA model without the DPD: metrics.jsonl
# *_no_dpd_db keys and *_improvement_db = no_dpd - with (checked per line), the same keys in
# eval --json, the summary line, the report's rows and reference lines, and a resumed run
# keeps them. Independent check: the DPD run's no-DPD ACLR (PA_model(x), OpenDPD ACLR on
# the val and test splits) equals the ACLR that `eval` of the PA run itself measures on
# them (another code path: the PA run's trainer). A PA-model run has no such keys.
# run --dpd-out writes OpenDPD's run_dpd CSV (I,Q,I_dpd,Q_dpd of the test split), checked
# against the test split's file and against `run` over the same input.
set -euo pipefail
source "$(dirname "$0")/common.bash"

small_sim
run train-pa --data "$D" "${SMALL[@]}" --epochs 1 --out "$TMP/pa" -q
expect_rc 0 "train-pa"
hasnot "$(cat "$TMP/pa/metrics.jsonl")" "no_dpd" "a PA-model run has no baseline keys"

run train-dpd --pa-run "$TMP/pa" "${SMALL[@]}" --epochs 2 --out "$TMP/dpd" --progress lines
expect_rc 0 "train-dpd"
has "$OUT" "baseline:   the PA model without the DPD" "summary line with the baseline"
has "$OUT" "the DPD improves NMSE by" "summary line with the improvement"
has "$ERR" "(no DPD " "epoch lines with the baseline ACLR"
n=0
while IFS= read -r line; do
    n=$((n + 1))
    for s in val test; do
        for k in nmse aclr_l aclr_r aclr_avg evm; do
            has "$line" "\"${s}_${k}_no_dpd_db\":" "line $n: ${s}_${k}_no_dpd_db"
        done
        w=$(json_num "$line" "${s}_aclr_avg_db"); b=$(json_num "$line" "${s}_aclr_avg_no_dpd_db")
        near "$(json_num "$line" "${s}_aclr_improvement_db")" "$(awk -v a="$b" -v c="$w" 'BEGIN { printf "%.10f", a - c }')" 1e-6 \
            "line $n: ${s} ACLR improvement = no DPD - with"
        w=$(json_num "$line" "${s}_nmse_db"); b=$(json_num "$line" "${s}_nmse_no_dpd_db")
        near "$(json_num "$line" "${s}_nmse_improvement_db")" "$(awk -v a="$b" -v c="$w" 'BEGIN { printf "%.10f", a - c }')" 1e-6 \
            "line $n: ${s} NMSE improvement"
        w=$(json_num "$line" "${s}_evm_db"); b=$(json_num "$line" "${s}_evm_no_dpd_db")
        near "$(json_num "$line" "${s}_evm_improvement_db")" "$(awk -v a="$b" -v c="$w" 'BEGIN { printf "%.10f", a - c }')" 1e-6 \
            "line $n: ${s} EVM improvement"
    done
done <"$TMP/dpd/metrics.jsonl"
[ "$n" -eq 2 ] && pass || fail "metrics.jsonl has $n lines, want 2"
L1=$(head -n 1 "$TMP/dpd/metrics.jsonl"); L2=$(tail -n 1 "$TMP/dpd/metrics.jsonl")
near "$(json_num "$L1" test_aclr_avg_no_dpd_db)" "$(json_num "$L2" test_aclr_avg_no_dpd_db)" 0 "the baseline is a constant of the run"

# independent path: the PA run's own evaluation measures PA_model(x) on the same split
run eval --run "$TMP/pa" --json
expect_rc 0 "eval of the PA run"
near "$(json_num "$L2" test_aclr_avg_no_dpd_db)" "$(json_num "$OUT" test_aclr_avg_db)" 1e-6 \
    "no-DPD ACLR = the PA model's own test ACLR (eval of the PA run)"
near "$(json_num "$L2" val_aclr_l_no_dpd_db)" "$(json_num "$OUT" val_aclr_l_db)" 1e-6 "no-DPD val ACLR left = PA run's"

# eval of the DPD run: the same keys and values as the best line
run eval --run "$TMP/dpd" --json
expect_rc 0 "eval --json of the DPD run"
best=$(grep '"best":true' "$TMP/dpd/metrics.jsonl")
for k in test_nmse_no_dpd_db test_aclr_avg_no_dpd_db test_evm_no_dpd_db test_aclr_improvement_db val_evm_improvement_db; do
    near "$(json_num "$OUT" $k)" "$(json_num "$best" $k)" 1e-6 "eval $k = the best epoch's"
done
run eval --run "$TMP/dpd"
expect_rc 0 "eval (text)"
has "$OUT" "test: PA model, no DPD" "eval table row without the DPD"
has "$OUT" "the DPD improves" "eval improvement line"

# the report: summary rows and the reference lines in the curves
R=$(cat "$TMP/dpd/report.html")
has "$R" "PA model without DPD, test NMSE / ACLR avg / EVM" "report: baseline row"
has "$R" "improvement by the DPD" "report: improvement row"
has "$R" "test, PA model without DPD" "report: reference line in the curves"
has "$R" "PSD (dB rel. in-band mean)" "report: one PSD normalisation"
has "$R" "test ACLR gain vs no DPD (dB)" "report: per-epoch table with the gain over the baseline"

# resume: the records of the checkpoint get the baseline back
run train-dpd --pa-run "$TMP/pa" "${SMALL[@]}" --epochs 1 --out "$TMP/dpd_b" -q
expect_rc 0 "train-dpd 1 epoch"
run train-dpd --resume "$TMP/dpd_b" --epochs 2 -q
expect_rc 0 "train-dpd --resume"
R1=$(head -n 1 "$TMP/dpd_b/metrics.jsonl")
near "$(json_num "$R1" test_aclr_avg_no_dpd_db)" "$(json_num "$L1" test_aclr_avg_no_dpd_db)" 1e-9 \
    "resumed run: epoch 1 keeps its baseline"
# run --dpd-out: OpenDPD's run_dpd layout (I,Q,I_dpd,Q_dpd on the test split), the I,Q
# columns the test split's input, the I_dpd,Q_dpd columns what `run` streams from it
run run --run "$TMP/dpd" --dpd-out "$TMP/dpd_out.csv"
expect_rc 0 "run --dpd-out"
has "$(head -n 1 "$TMP/dpd_out.csv")" "I,Q,I_dpd,Q_dpd" "run_dpd header"
nrow=$(($(wc -l <"$TMP/dpd_out.csv") - 1)); ntest=$(($(wc -l <"$D/test_input.csv") - 1))
[ "$nrow" -eq "$ntest" ] && pass || fail "--dpd-out has $nrow rows, the test split $ntest"
cmp -s <(tail -n +2 "$TMP/dpd_out.csv" | cut -d, -f1,2) <(tail -n +2 "$D/test_input.csv") && pass ||
    fail "I,Q columns are not the test split's input"
run run --run "$TMP/dpd" --in "$D/test_input.csv" --out "$TMP/u.csv"
expect_rc 0 "run --in test_input.csv"
cmp -s <(tail -n +2 "$TMP/dpd_out.csv" | cut -d, -f3,4) <(tail -n +2 "$TMP/u.csv") && pass ||
    fail "I_dpd,Q_dpd columns differ from run's stream over the same input"
run run --run "$TMP/dpd" --dpd-out "$TMP/dpd_out2.csv" -q
has "$(cat "$TMP/dpd_out2.csv")" "I,Q,I_dpd,Q_dpd" "--dpd-out -q writes the file"
run run --run "$TMP/dpd" --dpd-out "$TMP/dpd_out.csv"
has "$OUT" "baseline:   the PA model without the DPD: NMSE" "run: the DPD result with its baseline"
run run --run "$TMP/pa" --dpd-out "$TMP/x.csv"
expect_rc 2 "--dpd-out of a PA run"
has "$ERR" "--dpd-out needs a DPD run" "--dpd-out of a PA run: message"
run run --run "$TMP/dpd" --in "$D/test_input.csv" --out "$TMP/z.csv" --through-pa
expect_rc 0 "run --through-pa"
has "$OUT" "baseline:   the PA model without the DPD" "--through-pa prints the baseline"
run run --run "$TMP/dpd" --in "$D/test_input.csv" --out "$TMP/z2.csv" --data "$D"
expect_rc 2 "--data without --dpd-out"
# two data-parallel ranks: the baseline comes from rank 0 to every record, equal to one process's
if command -v mpirun >/dev/null 2>&1; then
    mpi_setup
    mrun 2 train-dpd --pa-run "$TMP/pa" "${SMALL[@]}" --epochs 2 --out "$TMP/dpd_mpi" -q
    expect_rc 0 "mpirun -np 2 train-dpd"
    M2=$(tail -n 1 "$TMP/dpd_mpi/metrics.jsonl")
    for k in test_aclr_avg_no_dpd_db val_nmse_no_dpd_db test_evm_no_dpd_db; do
        near "$(json_num "$M2" $k)" "$(json_num "$L2" $k)" 1e-9 "2 ranks: $k = one process's"
    done
else
    echo "mpirun not found: the 2-rank check skipped"
fi
finish
