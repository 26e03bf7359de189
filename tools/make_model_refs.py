#!/usr/bin/python3
"""Reference vectors for distdpd's models (src/models), from independent PyTorch code.

Each model of the registry is re-written here in PyTorch (float64, CPU) from its
description in docs/models.md, with PyTorch state_dict names equal to distdpd's parameter
names. For a small random case of each (random weights, random I/Q frames x (B, T, 2),
random upstream gradient G) it saves the weights, the output y and the gradients of
L = sum(y * G) with respect to x and every weight to tests/data/model_refs.json.
tests/test_models_ref.c loads the weights BY NAME into the model's parameter table, runs
distdpd's float32 forward/backward and compares.

The "gru" case is OpenDPD's GRU backbone exactly: nn.GRU(2, H, batch_first=True) followed
by nn.Linear(H, 2), at H = 23 (1,911 parameters). "dgru" is OpenDPD's DGRU forward; "tcn" is
OpenDPD's TCN with causal (left-only) padding, as distdpd implements it.

Usage:  /usr/bin/python3 tools/make_model_refs.py [outdir]     (default: tests/data)

Format (JSON): {"generator", "torch", "dtype", "cases": [{"name", "model", "config":
{"hidden", "layers", "memory", "order", "kernel", "cross", "B", "T"}, "tensors": {name:
{"shape", "data"}}}]} with tensors x, y, g_y, d_x, every parameter <name> and d_<name>.
"""
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def T(t):
    t = t.detach().contiguous()
    return {"shape": list(t.shape), "data": [float("%.10g" % v) for v in t.reshape(-1).tolist()]}


def rand(*shape, scale=1.0):
    return (torch.rand(*shape) * 2 - 1) * scale


def iqfeat(x):
    i, q = x[..., 0:1], x[..., 1:2]
    amp = torch.sqrt(i * i + q * q)
    return torch.cat((i, q, amp, amp ** 3, q / amp, i / amp), dim=-1)


def causal_conv(conv, x):
    """x (B, C, T); left zero padding (K-1)*dilation."""
    pad = (conv.kernel_size[0] - 1) * conv.dilation[0]
    return conv(F.pad(x, (pad, 0)))


def delay(x, m):
    """x (B, T, C) delayed by m samples (zeros shifted in)."""
    if m == 0:
        return x
    return F.pad(x, (0, 0, m, 0))[:, : x.shape[1], :]


class GRUModel(nn.Module):  # OpenDPD backbones/gru.py
    def __init__(self, H):
        super().__init__()
        self.rnn = nn.GRU(2, H, batch_first=True)
        self.fc_out = nn.Linear(H, 2)

    def forward(self, x):
        return self.fc_out(self.rnn(x)[0])


class LSTMModel(nn.Module):
    def __init__(self, H):
        super().__init__()
        self.rnn = nn.LSTM(2, H, batch_first=True)
        self.fc_out = nn.Linear(H, 2)

    def forward(self, x):
        return self.fc_out(self.rnn(x)[0])


class DGRUModel(nn.Module):  # OpenDPD backbones/dgru.py
    def __init__(self, H):
        super().__init__()
        self.rnn = nn.GRU(6, H, batch_first=True)
        self.fc_out = nn.Linear(H + 6, 2)
        self.fc_hid = nn.Linear(H, H)

    def forward(self, x):
        f = iqfeat(x)
        out = torch.relu(self.fc_hid(self.rnn(f)[0]))
        return self.fc_out(torch.cat((out, f), dim=-1))


class TCNModel(nn.Module):  # OpenDPD backbones/tcn.py, causal padding
    def __init__(self, C, L, K):
        super().__init__()
        mods = [nn.Conv1d(6, C, 1), nn.Hardswish()]
        for i in range(L):
            mods += [nn.Conv1d(C, C, K, dilation=2 ** i, groups=C, bias=False), nn.Hardswish()]
        mods += [nn.Conv1d(C, 2, 1, bias=False)]
        self.network = nn.Sequential(*mods)

    def forward(self, x):
        h = iqfeat(x).transpose(1, 2)
        for mod in self.network:
            h = causal_conv(mod, h) if isinstance(mod, nn.Conv1d) else mod(h)
        return h.transpose(1, 2) + x


class ResBlock(nn.Module):
    def __init__(self, C, K):
        super().__init__()
        self.conv = nn.Conv1d(C, C, K)
        self.proj = nn.Conv1d(C, C, 1)


class ResNetModel(nn.Module):
    def __init__(self, C, L, K):
        super().__init__()
        self.stem = nn.Conv1d(6, C, 1)
        self.blocks = nn.ModuleList([ResBlock(C, K) for _ in range(L)])
        self.head = nn.Conv1d(C, 2, 1)

    def forward(self, x):
        h = self.stem(iqfeat(x).transpose(1, 2))
        for b in self.blocks:
            h = h + b.proj(torch.tanh(causal_conv(b.conv, h)))
        return self.head(h).transpose(1, 2) + x


class TDNNModel(nn.Module):
    def __init__(self, M, H, L, augmented):
        super().__init__()
        self.M, self.aug = M, augmented
        Fd = 5 if augmented else 2
        self.hidden = nn.ModuleList([nn.Linear(Fd * M if i == 0 else H, H) for i in range(L)])
        self.fc_out = nn.Linear(H, 2)

    def forward(self, x):
        if self.aug:
            r = torch.sqrt(x[..., 0:1] ** 2 + x[..., 1:2] ** 2)
            f = torch.cat((x, r, r ** 2, r ** 3), dim=-1)
        else:
            f = x
        h = torch.cat([delay(f, m) for m in range(self.M)], dim=-1)
        for lin in self.hidden:
            h = torch.tanh(lin(h))
        return self.fc_out(h)


class HamBlock(nn.Module):
    def __init__(self, H, M):
        super().__init__()
        self.nl = nn.ModuleList([nn.Linear(1, H), nn.Linear(H, H), nn.Linear(H, 2)])
        self.fir = nn.Conv1d(4, 2, M, bias=False)


class HammersteinModel(nn.Module):
    def __init__(self, H, L, M):
        super().__init__()
        self.blocks = nn.ModuleList([HamBlock(H, M) for _ in range(L)])

    def forward(self, x):
        u = x
        for b in self.blocks:
            a = torch.sqrt(u[..., 0:1] ** 2 + u[..., 1:2] ** 2)
            g = b.nl[2](torch.tanh(b.nl[1](torch.tanh(b.nl[0](a)))))
            ur, ui, gr, gi = u[..., 0:1], u[..., 1:2], g[..., 0:1], g[..., 1:2]
            cat = torch.cat((gr * ur - gi * ui, gr * ui + gi * ur, a * ur, a * ui), dim=-1)
            u = u + causal_conv(b.fir, cat.transpose(1, 2)).transpose(1, 2)
        return u


class GMPModel(nn.Module):
    def __init__(self, K, M, C):
        super().__init__()
        self.K, self.M, self.C = K, M, C
        self.Kb = max(K - 1, 1) if C else 0
        self.aligned = nn.Parameter(torch.zeros(K, M, 2))
        if C:
            self.lagging = nn.Parameter(torch.zeros(self.Kb, C, C, 2))

    def forward(self, x):
        r = torch.sqrt(x[..., 0] ** 2 + x[..., 1] ** 2)
        xr, xi = x[..., 0], x[..., 1]
        yr = torch.zeros_like(xr)
        yi = torch.zeros_like(xr)

        def d(v, m):
            return F.pad(v, (m, 0))[:, : v.shape[1]] if m else v

        def add(c, ur, ui, p):
            nonlocal yr, yi
            yr = yr + p * (c[0] * ur - c[1] * ui)
            yi = yi + p * (c[0] * ui + c[1] * ur)

        for l in range(self.M):
            for k in range(self.K):
                add(self.aligned[k, l], d(xr, l), d(xi, l), d(r, l) ** k)
        if self.C:
            for l in range(self.C):
                for m in range(1, self.C + 1):
                    for k in range(1, self.Kb + 1):
                        add(self.lagging[k - 1, l, m - 1], d(xr, l), d(xi, l), d(r, l + m) ** k)
        return torch.stack((yr, yi), dim=-1)


def case(name, model_name, mod, cfg, B, Tn, seed, wscale=0.5, xscale=0.7):
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in mod.parameters():
            p.copy_(rand(*p.shape, scale=wscale))
    x = rand(B, Tn, 2, scale=xscale).requires_grad_()
    y = mod(x)
    g = rand(B, Tn, 2)
    (y * g).sum().backward()
    tens = {"x": T(x), "y": T(y), "g_y": T(g), "d_x": T(x.grad)}
    for pn, p in mod.named_parameters():
        tens[pn] = T(p)
        tens["d_" + pn] = T(p.grad)
    full = {"hidden": 0, "layers": 0, "memory": 0, "order": 0, "kernel": 0, "cross": 0}
    full.update(cfg)
    full.update({"B": B, "T": Tn})
    return {"name": name, "model": model_name, "config": full, "tensors": tens}


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "tests/data"
    cases = [
        case("gru_h23", "gru", GRUModel(23), {"hidden": 23}, 2, 12, 1),
        case("lstm_h8", "lstm", LSTMModel(8), {"hidden": 8}, 2, 10, 2),
        case("dgru_h10", "dgru", DGRUModel(10), {"hidden": 10}, 2, 10, 3),
        case("tcn_c8", "tcn", TCNModel(8, 3, 3), {"hidden": 8, "layers": 3, "kernel": 3}, 2, 20, 4),
        case("resnet_c6", "resnet", ResNetModel(6, 2, 3), {"hidden": 6, "layers": 2, "kernel": 3},
             2, 10, 5),
        case("rvtdnn", "rvtdnn", TDNNModel(4, 8, 2, False), {"memory": 4, "hidden": 8, "layers": 2},
             2, 10, 6),
        case("arvtdnn", "arvtdnn", TDNNModel(4, 8, 2, True),
             {"memory": 4, "hidden": 8, "layers": 2}, 2, 10, 7),
        case("hammerstein", "hammerstein", HammersteinModel(6, 2, 3),
             {"hidden": 6, "layers": 2, "memory": 3}, 2, 10, 8),
        case("gmp", "gmp", GMPModel(4, 3, 2), {"order": 4, "memory": 3, "cross": 2}, 2, 10, 9),
        case("mp", "mp", GMPModel(5, 3, 0), {"order": 5, "memory": 3}, 2, 10, 10),
    ]
    out = {"generator": "tools/make_model_refs.py", "torch": torch.__version__,
           "dtype": "float64", "cases": cases}
    path = os.path.join(outdir, "model_refs.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
    print("wrote", path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
