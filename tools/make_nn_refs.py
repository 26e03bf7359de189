#!/usr/bin/python3
"""Reference vectors for distdpd's neural layers, from an independent implementation.

Runs PyTorch (Debian's python3-torch, CPU, float64) on small random cases of
torch.nn.GRU, torch.nn.LSTM, torch.nn.Linear, causal torch.nn.Conv1d (dilated, grouped,
depthwise, pointwise), the activations and the I/Q feature extraction, with a random
upstream gradient G, and saves inputs, weights, outputs and every gradient of
L = sum(out * G) (+ sum(c_n * Gc) for the LSTM) to tests/data/nn_ref_<layer>.json.
tests/test_nn_ref.c loads them and compares distdpd's float64 and float32 paths.

Usage:  /usr/bin/python3 tools/make_nn_refs.py [outdir]     (default: tests/data)

File format (JSON): {"generator", "torch", "cases": [{"name", "layer", "config": {...},
"tensors": {name: {"shape": [...], "data": [flat row-major values]}}}]}. Tensor names:
inputs x (B,T,D) / h0 / c0 (B,H), weights with PyTorch state_dict names (weight_ih_l0,
weight_hh_l0, bias_ih_l0, bias_hh_l0, weight, bias), out, cn, the upstream gradients
g_out, g_cn, and gradients d_<name> for every input and weight. All layouts are
batch-first (B, T, C) as in distdpd; conv weights keep PyTorch's (C_out, C_in/groups, K).
"""
import json
import os
import sys

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def T(t):
    t = t.detach().contiguous()
    return {"shape": list(t.shape), "data": [float(v) for v in t.reshape(-1).tolist()]}


def rand(*shape, scale=1.0):
    return (torch.rand(*shape) * 2 - 1) * scale


def gru_case(name, B, Tn, D, H, with_h0, seed):
    torch.manual_seed(seed)
    m = torch.nn.GRU(D, H, batch_first=True)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(rand(*p.shape, scale=0.8))
    x = rand(B, Tn, D).requires_grad_()
    h0 = (rand(1, B, H, scale=0.9) if with_h0 else torch.zeros(1, B, H)).requires_grad_()
    out, _ = m(x, h0)
    g = rand(B, Tn, H)
    (out * g).sum().backward()
    tens = {"x": T(x), "h0": T(h0[0]), "out": T(out), "g_out": T(g), "d_x": T(x.grad),
            "d_h0": T(h0.grad[0])}
    for pn, p in m.named_parameters():
        tens[pn] = T(p)
        tens["d_" + pn] = T(p.grad)
    return {"name": name, "layer": "gru", "config": {"B": B, "T": Tn, "D": D, "H": H},
            "tensors": tens}


def lstm_case(name, B, Tn, D, H, seed):
    torch.manual_seed(seed)
    m = torch.nn.LSTM(D, H, batch_first=True)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(rand(*p.shape, scale=0.8))
    x = rand(B, Tn, D).requires_grad_()
    h0 = rand(1, B, H, scale=0.9).requires_grad_()
    c0 = rand(1, B, H, scale=1.5).requires_grad_()
    out, (_, cn) = m(x, (h0, c0))
    g = rand(B, Tn, H)
    gc = rand(1, B, H)
    ((out * g).sum() + (cn * gc).sum()).backward()
    tens = {"x": T(x), "h0": T(h0[0]), "c0": T(c0[0]), "out": T(out), "cn": T(cn[0]),
            "g_out": T(g), "g_cn": T(gc[0]), "d_x": T(x.grad), "d_h0": T(h0.grad[0]),
            "d_c0": T(c0.grad[0])}
    for pn, p in m.named_parameters():
        tens[pn] = T(p)
        tens["d_" + pn] = T(p.grad)
    return {"name": name, "layer": "lstm", "config": {"B": B, "T": Tn, "D": D, "H": H},
            "tensors": tens}


def linear_case(name, B, Tn, din, dout, seed):
    torch.manual_seed(seed)
    m = torch.nn.Linear(din, dout)
    x = rand(B, Tn, din).requires_grad_()
    out = m(x)
    g = rand(B, Tn, dout)
    (out * g).sum().backward()
    return {"name": name, "layer": "dense",
            "config": {"N": B * Tn, "in_dim": din, "out_dim": dout},
            "tensors": {"x": T(x), "weight": T(m.weight), "bias": T(m.bias), "out": T(out),
                        "g_out": T(g), "d_x": T(x.grad), "d_weight": T(m.weight.grad),
                        "d_bias": T(m.bias.grad)}}


def conv_case(name, B, Tn, cin, cout, K, dil, groups, seed):
    torch.manual_seed(seed)
    m = torch.nn.Conv1d(cin, cout, K, dilation=dil, groups=groups)
    x = rand(B, Tn, cin).requires_grad_()
    # causal: pad (K-1)*dilation zeros on the left of the time axis only
    xp = F.pad(x.permute(0, 2, 1), ((K - 1) * dil, 0))
    out = m(xp).permute(0, 2, 1)
    assert out.shape == (B, Tn, cout)
    g = rand(B, Tn, cout)
    (out * g).sum().backward()
    return {"name": name, "layer": "conv1d",
            "config": {"B": B, "T": Tn, "c_in": cin, "c_out": cout, "kernel": K,
                       "dilation": dil, "groups": groups},
            "tensors": {"x": T(x), "weight": T(m.weight), "bias": T(m.bias), "out": T(out),
                        "g_out": T(g), "d_x": T(x.grad), "d_weight": T(m.weight.grad),
                        "d_bias": T(m.bias.grad)}}


def act_cases(seed):
    torch.manual_seed(seed)
    # cover every Hardswish region (x < -3, -3..3, > 3) and both ReLU sides, away from kinks
    x0 = torch.cat([rand(40, scale=5.0), torch.tensor([-4.5, -3.5, -2.5, -0.7, 0.3, 2.9, 3.2, 6.0])])
    cases = []
    for nm, fn in [("tanh", torch.tanh), ("sigmoid", torch.sigmoid), ("relu", torch.relu),
                   ("hardswish", F.hardswish)]:
        x = x0.clone().requires_grad_()
        out = fn(x)
        g = rand(x.shape[0])
        (out * g).sum().backward()
        cases.append({"name": "act_" + nm, "layer": "act", "config": {"act": nm, "n": x.shape[0]},
                      "tensors": {"x": T(x), "out": T(out), "g_out": T(g), "d_x": T(x.grad)}})
    return cases


def iqfeat_case(seed):
    torch.manual_seed(seed)
    N = 25
    iq = rand(N, 2).requires_grad_()
    i, q = iq[:, 0], iq[:, 1]
    r = torch.sqrt(i * i + q * q)
    ph = torch.atan2(q, i)
    out = torch.stack([i, q, r, r ** 3, torch.sin(ph), torch.cos(ph)], dim=1)
    g = rand(N, 6)
    (out * g).sum().backward()
    return {"name": "iqfeat", "layer": "iqfeat", "config": {"N": N},
            "tensors": {"x": T(iq), "out": T(out), "g_out": T(g), "d_x": T(iq.grad)}}


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data")
    files = {
        # B >= 8 cases exercise the vectorised float path (8 lanes + scalar tail)
        "gru": [gru_case("gru_h0", 3, 7, 2, 5, True, 1),
                gru_case("gru_zero_h0", 2, 5, 3, 4, False, 2),
                gru_case("gru_b11", 11, 4, 2, 10, True, 12)],
        "lstm": [lstm_case("lstm", 3, 6, 3, 4, 3), lstm_case("lstm_b10", 10, 3, 2, 6, 13)],
        "dense": [linear_case("linear", 2, 4, 5, 3, 4), linear_case("linear_23_2", 2, 3, 23, 2, 5)],
        "conv1d": [conv_case("conv_dil2", 2, 9, 3, 4, 3, 2, 1, 6),
                   conv_case("conv_depthwise", 2, 12, 4, 4, 5, 2, 4, 7),
                   conv_case("conv_grouped", 2, 10, 4, 6, 2, 3, 2, 8),
                   conv_case("conv_pointwise", 2, 6, 3, 5, 1, 1, 1, 9)],
        "misc": act_cases(10) + [iqfeat_case(11)],
    }
    for layer, cases in files.items():
        path = os.path.join(outdir, "nn_ref_%s.json" % layer)
        with open(path, "w") as f:
            json.dump({"generator": "tools/make_nn_refs.py", "torch": torch.__version__,
                       "dtype": "float64", "cases": cases}, f, separators=(",", ":"))
            f.write("\n")
        print("%s: %d cases, %d bytes" % (path, len(cases), os.path.getsize(path)))


if __name__ == "__main__":
    main()
