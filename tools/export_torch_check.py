#!/usr/bin/python3
"""Loads weights written by `distdpd export --format npz|safetensors` into the PyTorch
module of the model (recognised from the tensors): distdpd's "gru" (OpenDPD
backbones/gru.py: nn.GRU(2, H, num_layers=L, batch_first=True) then nn.Linear(H, 2)),
"lstm" (the same with nn.LSTM) or "dgru" (OpenDPD backbones/dgru.py's forward) with
load_state_dict(strict=True), runs it over an I/Q CSV file as one stream from zero state,
and compares with distdpd's output.

Usage: export_torch_check.py WEIGHTS IN.csv REF.cf32 [TOL]
  WEIGHTS  .npz (read with numpy) or .safetensors (parsed here from its documented
           layout: u64 little-endian header length, JSON header, raw data)
  REF      float32 I, Q interleaved: `distdpd run --run RUN --in IN.csv --out REF.cf32`
Prints the largest |difference|; exit 0 if it is <= TOL (default 1e-5), 1 otherwise,
77 when numpy or torch is missing (tests skip then).
"""
import json
import struct
import sys

try:
    import numpy as np
    import torch
    import torch.nn as nn
except ImportError as e:  # the test skips
    print("SKIP: %s (install python3-numpy and python3-torch)" % e)
    sys.exit(77)


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (hl,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hl])
    data = raw[8 + hl:]
    out = {}
    for name, d in header.items():
        if name == "__metadata__":
            continue
        assert d["dtype"] == "F32", d
        b, e = d["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype="<f4").reshape(d["shape"])
    return out, header.get("__metadata__", {})


def read_weights(path):
    if path.endswith(".npz"):
        z = np.load(path)
        return {k: z[k] for k in z.files}, {}
    return read_safetensors(path)


class GRUModel(nn.Module):  # OpenDPD backbones/gru.py
    def __init__(self, hidden, layers):
        super().__init__()
        self.rnn = nn.GRU(2, hidden, num_layers=layers, batch_first=True)
        self.fc_out = nn.Linear(hidden, 2)

    def forward(self, x):
        return self.fc_out(self.rnn(x)[0])


class LSTMModel(nn.Module):
    def __init__(self, hidden, layers):
        super().__init__()
        self.rnn = nn.LSTM(2, hidden, num_layers=layers, batch_first=True)
        self.fc_out = nn.Linear(hidden, 2)

    def forward(self, x):
        return self.fc_out(self.rnn(x)[0])


class DGRUModel(nn.Module):  # OpenDPD backbones/dgru.py (module order rnn, fc_out, fc_hid)
    def __init__(self, hidden, layers=1):
        super().__init__()
        self.rnn = nn.GRU(6, hidden, num_layers=layers, batch_first=True)
        self.fc_out = nn.Linear(hidden + 6, 2)
        self.fc_hid = nn.Linear(hidden, hidden)

    def forward(self, x):
        i, q = x[..., 0:1], x[..., 1:2]
        amp = torch.sqrt(i * i + q * q)
        f = torch.cat((i, q, amp, amp ** 3, q / amp, i / amp), dim=-1)
        out = torch.relu(self.fc_hid(self.rnn(f)[0]))
        return self.fc_out(torch.cat((out, f), dim=-1))


def main():
    weights, iq, ref = sys.argv[1:4]
    tol = float(sys.argv[4]) if len(sys.argv) > 4 else 1e-5
    w, meta = read_weights(weights)
    w = {k[len("backbone."):] if k.startswith("backbone.") else k: v for k, v in w.items()}
    hidden = w["rnn.weight_hh_l0"].shape[1]
    layers = sum(1 for k in w if k.startswith("rnn.weight_ih_l"))
    if meta:
        print("metadata:", meta)
    if "fc_hid.weight" in w:
        name, cls = "dgru", DGRUModel
    elif w["rnn.weight_hh_l0"].shape[0] == 4 * hidden:
        name, cls = "lstm", LSTMModel
    else:
        name, cls = "gru", GRUModel
    m = cls(hidden, layers)
    m.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in w.items()}, strict=True)
    x = np.loadtxt(iq, delimiter=",", skiprows=1, dtype=np.float32)
    y_ref = np.fromfile(ref, dtype="<f4").reshape(-1, 2)
    with torch.no_grad():
        y = m(torch.from_numpy(x)[None]).numpy()[0]
    diff = float(np.max(np.abs(y - y_ref)))
    print("torch %s(hidden=%d, layers=%d): %d samples, max |torch - distdpd| = %.3g (tol %g)"
          % (name, hidden, layers, len(x), diff, tol))
    sys.exit(0 if diff <= tol else 1)


if __name__ == "__main__":
    main()
