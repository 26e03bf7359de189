#!/bin/bash
# distdpd export --format onnx (docs/deploy.md): the files of a 1-layer and a 2-layer gru
# (a PA model and a DPD) pass onnx.checker with shape inference and, evaluated with the
# ONNX operators' documented equations in numpy (tools/onnx_check.py: GRU gates z, r, h,
# linear_before_reset), give `distdpd run`'s output within 1e-5 over the test split; the
# same check fails when the z and r blocks are swapped (so the gate permutation is
# tested). Skipped (77) without Debian's python3-numpy and python3-onnx.
set -euo pipefail
source "$(dirname "$0")/common.bash"

need_python numpy onnx
CHECK=${DD_SOURCE_DIR:-.}/tools/onnx_check.py
D=$TMP/sim
run simulate --out "$D" --samples 12000 -q
expect_rc 0 "simulate"
SMALL=(--frame 32 --stride 4 --batch 32 --lr 2e-2 --epochs 1 -q)
run train-pa --data "$D" --model gru --hidden 8 "${SMALL[@]}" --out "$TMP/pa1"
expect_rc 0 "train-pa"
run train-pa --data "$D" --model gru --hidden 5 --layers 2 "${SMALL[@]}" --out "$TMP/pa2"
expect_rc 0 "train-pa 2 layers"
run train-dpd --data "$D" --pa-run "$TMP/pa1" --model gru --hidden 6 "${SMALL[@]}" --out "$TMP/dpd"
expect_rc 0 "train-dpd"
for R in pa1 pa2 dpd; do
    run export --run "$TMP/$R" --format onnx --out "$TMP/$R.onnx"
    expect_rc 0 "export $R onnx"
    has "$OUT" "ONNX (IR 7, opset 13)" "$R summary"
    run run --run "$TMP/$R" --in "$D/test_input.csv" --out "$TMP/$R.cf32" -q
    set +e
    res=$("$PY" "$CHECK" "$TMP/$R.onnx" "$D/test_input.csv" "$TMP/$R.cf32" 1e-5 2>&1)
    rc=$?
    set -e
    if [ $rc -eq 0 ]; then pass; else fail "$R: onnx check ($rc): $res"; fi
done
has "$res" "[GRU,Squeeze,MatMul,Add]" "one GRU node per layer, then the head"
# swapping ONNX's z and r blocks must break the agreement
"$PY" - "$TMP/pa1.onnx" "$TMP/swapped.onnx" <<'PY'
import sys
import onnx
from onnx import numpy_helper
m = onnx.load(sys.argv[1])
for i, t in enumerate(m.graph.initializer):
    if t.name == "W_l0":
        a = numpy_helper.to_array(t).copy()
        H = a.shape[1] // 3
        a[0, :H], a[0, H:2 * H] = a[0, H:2 * H].copy(), a[0, :H].copy()
        m.graph.initializer[i].CopyFrom(numpy_helper.from_array(a, "W_l0"))
onnx.save(m, sys.argv[2])
PY
set +e
"$PY" "$CHECK" "$TMP/swapped.onnx" "$D/test_input.csv" "$TMP/pa1.cf32" 1e-5 >/dev/null 2>&1
rc=$?
set -e
if [ $rc -eq 1 ]; then pass; else fail "swapped gate blocks not detected (exit $rc)"; fi
finish
