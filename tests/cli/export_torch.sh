#!/bin/bash
# A PyTorch user loads distdpd's exported weights (docs/deploy.md): the npz (numpy) and
# the safetensors file (parsed from its documented layout) of a trained gru PA model,
# with and without OpenDPD's "backbone." prefix, go into nn.GRU + nn.Linear with
# load_state_dict(strict=True) (tools/export_torch_check.py), whose output over the test
# split equals `distdpd run`'s within 1e-5. A 2-layer gru too (names rnn.*_l1).
# Skipped (77) without Debian's python3-numpy and python3-torch.
set -euo pipefail
source "$(dirname "$0")/common.bash"

PY=/usr/bin/python3
if ! [ -x "$PY" ] || ! "$PY" -c "import numpy, torch" 2>/dev/null; then
    echo "SKIP: $PY with numpy and torch not found (apt-get install python3-numpy python3-torch)"
    exit 77
fi
CHECK=${DD_SOURCE_DIR:-.}/tools/export_torch_check.py
D=$TMP/sim
run simulate --out "$D" --samples 12000 -q
expect_rc 0 "simulate"
SMALL=(--frame 32 --stride 4 --batch 32 --lr 2e-2 --epochs 1 -q)
for L in 1 2; do
    run train-pa --data "$D" --model gru --hidden 8 --layers $L "${SMALL[@]}" --out "$TMP/pa$L"
    expect_rc 0 "train-pa layers $L"
    run run --run "$TMP/pa$L" --in "$D/test_input.csv" --out "$TMP/ref$L.cf32" -q
    expect_rc 0 "run"
    for f in npz safetensors; do
        for names in "" --opendpd-names; do
            run export --run "$TMP/pa$L" --format $f $names --out "$TMP/w$L$names.$f"
            expect_rc 0 "export $f $names"
            set +e
            res=$("$PY" "$CHECK" "$TMP/w$L$names.$f" "$D/test_input.csv" "$TMP/ref$L.cf32" 1e-5 2>&1)
            rc=$?
            set -e
            if [ $rc -eq 0 ]; then pass; else fail "layers $L $f $names: torch check ($rc): $res"; fi
            has "$res" "torch gru(hidden=8, layers=$L)" "layers $L $f $names: shapes"
        done
    done
done
finish
