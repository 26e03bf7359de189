#!/bin/bash
# A PyTorch user loads distdpd's exported weights (docs/deploy.md): the npz (numpy) and
# the safetensors file (parsed from its documented layout) of a trained gru PA model,
# with and without OpenDPD's "backbone." prefix, go into nn.GRU + nn.Linear with
# load_state_dict(strict=True) (tools/export_torch_check.py), whose output over the test
# split equals `distdpd run`'s within 1e-5. A 2-layer gru too (names rnn.*_l1), an lstm
# and OpenDPD's dgru.
# The other way: an OpenDPD-style checkpoint (torch.save of a CoreModel-like module's
# state_dict, keys "backbone.rnn...") converted by tools/opendpd_import.py and read by
# distdpd import gives, through distdpd run, torch's output within 1e-5.
# Skipped (77) without Debian's python3-numpy and python3-torch.
set -euo pipefail
source "$(dirname "$0")/common.bash"

need_python numpy torch
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

# ---- OpenDPD .pt -> tools/opendpd_import.py -> distdpd import
cat >"$TMP/mk_pt.py" <<'PY'
import sys
import numpy as np
import torch
import torch.nn as nn
sys.path.insert(0, sys.argv[4])
from export_torch_check import GRUModel  # OpenDPD backbones/gru.py
torch.manual_seed(3)
class CoreModel(nn.Module):  # OpenDPD wraps the backbone
    def __init__(self, H):
        super().__init__()
        self.backbone = GRUModel(H, 1)
    def forward(self, x):
        return self.backbone(x)
m = CoreModel(11)
torch.save(m.state_dict(), sys.argv[1])
x = np.loadtxt(sys.argv[2], delimiter=",", skiprows=1, dtype=np.float32)
with torch.no_grad():
    m(torch.from_numpy(x)[None])[0].numpy().astype("<f4").tofile(sys.argv[3])
PY
"$PY" "$TMP/mk_pt.py" "$TMP/od.pt" "$D/test_input.csv" "$TMP/od_ref.cf32" "${DD_SOURCE_DIR:-.}/tools"
set +e
res=$("$PY" "${DD_SOURCE_DIR:-.}/tools/opendpd_import.py" "$TMP/od.pt" "$TMP/od.npz" 2>&1)
rc=$?
set -e
if [ $rc -eq 0 ]; then pass; else fail "opendpd_import.py ($rc): $res"; fi
has "$res" "rnn.weight_hh_l0 (33, 11)" "opendpd_import.py strips backbone."
run import --npz "$TMP/od.npz" --data "$D" --out "$TMP/od-run"
expect_rc 0 "import the converted OpenDPD checkpoint"
has "$OUT" "gru(hidden=11, layers=1)" "hidden from the shapes"
run run --run "$TMP/od-run" --in "$D/test_input.csv" --out "$TMP/od_out.cf32" -q
expect_rc 0 "run the imported model"
set +e
res=$("$PY" -c "import numpy as np, sys; a = np.fromfile(sys.argv[1], '<f4'); b = np.fromfile(sys.argv[2], '<f4'); print(a.size == b.size and float(np.max(np.abs(a - b))) <= 1e-5, float(np.max(np.abs(a - b))))" "$TMP/od_ref.cf32" "$TMP/od_out.cf32" 2>&1)
set -e
has "$res" "True" "imported OpenDPD model: distdpd run = torch within 1e-5 ($res)"
# lstm and dgru: the same names as their torch modules
for M in lstm dgru; do
    run train-pa --data "$D" --model $M --hidden 6 "${SMALL[@]}" --out "$TMP/$M"
    expect_rc 0 "train-pa $M"
    run run --run "$TMP/$M" --in "$D/test_input.csv" --out "$TMP/$M.cf32" -q
    run export --run "$TMP/$M" --format safetensors --out "$TMP/$M.safetensors"
    expect_rc 0 "export $M"
    set +e
    res=$("$PY" "$CHECK" "$TMP/$M.safetensors" "$D/test_input.csv" "$TMP/$M.cf32" 1e-5 2>&1)
    rc=$?
    set -e
    if [ $rc -eq 0 ]; then pass; else fail "$M: torch check ($rc): $res"; fi
    has "$res" "torch $M(hidden=6" "$M: the module"
done
finish
