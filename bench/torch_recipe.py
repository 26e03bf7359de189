#!/usr/bin/python3
"""The reference recipe in PyTorch: the twin of `distdpd train-pa` for bench/recipe_bench.sh.

GRU(2, H, batch_first) + Linear(H, 2) (OpenDPD's "gru" PA backbone), frames of F samples
with stride S cut from the training split (by index: a batch gathers its B frames from
the split array, no overlapping frames are materialised), MSE loss over all outputs,
AdamW (betas 0.9/0.999, eps 1e-8, weight decay 0.01), gradient-norm clip 200,
ReduceLROnPlateau on the validation NMSE (factor 0.5, patience 5, threshold 1e-4 rel,
min_lr 5e-5): the same recipe and constants as distdpd's defaults (docs/training.md).

With --init FILE (written by bench/recipe_export) the run starts from distdpd's initial
parameters and visits the frames in distdpd's order (its per-epoch Feistel permutation),
so both tools train the same problem step for step; only floating-point rounding differs.
Without it: OpenDPD's initialisation (orthogonal W_hh blocks, Xavier W_ih blocks and
fc_out, zero biases) from torch.manual_seed(seed) and a torch.randperm shuffle.

Evaluation after every epoch, like distdpd: the validation and test splits cut into
nperseg-long segments (the last zero-padded), each from zero state; segmented NMSE (mean
over segments of 10 log10(mean|e|^2 / mean|ref|^2)), as OpenDPD and dd_metrics_compute.

Prints one JSON line per epoch: {"epoch", "train_s", "eval_s", "loss", "val_nmse_db",
"test_nmse_db", "lr", "threads"}. Use Debian's /usr/bin/python3 (torch 1.13).
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
from torch import nn


def load_split(d, name):
    a = np.loadtxt(os.path.join(d, name), delimiter=",", skiprows=1, dtype=np.float32)
    return torch.from_numpy(np.ascontiguousarray(a.reshape(-1, 2)))


class Gru(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.rnn = nn.GRU(2, hidden, batch_first=True)
        self.fc_out = nn.Linear(hidden, 2)

    def forward(self, x):
        h, _ = self.rnn(x)
        return self.fc_out(h)


def opendpd_init(m, hidden):
    for name, p in m.rnn.named_parameters():
        if "bias" in name:
            nn.init.zeros_(p)
        elif "weight_hh" in name:
            for g in range(3):
                nn.init.orthogonal_(p.data[g * hidden:(g + 1) * hidden])
        elif "weight_ih" in name:
            for g in range(3):
                nn.init.xavier_uniform_(p.data[g * hidden:(g + 1) * hidden])
    nn.init.xavier_uniform_(m.fc_out.weight)
    nn.init.zeros_(m.fc_out.bias)


def segmented_nmse_db(pred, ref, nseg, seglen):
    e = (pred - ref).reshape(nseg, seglen, 2).double()
    r = ref.reshape(nseg, seglen, 2).double()
    num = (e * e).sum(dim=(1, 2))
    den = (r * r).sum(dim=(1, 2))
    return float((10 * torch.log10(num / den)).mean())


def evaluate(m, x, y, seglen):
    n = x.shape[0]
    nseg = (n + seglen - 1) // seglen
    pad = nseg * seglen - n
    xp = torch.cat([x, x.new_zeros(pad, 2)]) if pad else x
    yp = torch.cat([y, y.new_zeros(pad, 2)]) if pad else y
    with torch.no_grad():
        pred = m(xp.reshape(nseg, seglen, 2)).reshape(-1, 2)
    return segmented_nmse_db(pred, yp, nseg, seglen)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="OpenDPD split_csv directory")
    ap.add_argument("--hidden", type=int, default=23)
    ap.add_argument("--frame", type=int, default=200)
    ap.add_argument("--stride", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=5e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--init", help="JSON from bench/recipe_export: initial params + frame order")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(args.seed)
    with open(os.path.join(args.data, "spec.json")) as f:
        seglen = int(json.load(f).get("nperseg", 2560))
    xtr, ytr = load_split(args.data, "train_input.csv"), load_split(args.data, "train_output.csv")
    xva, yva = load_split(args.data, "val_input.csv"), load_split(args.data, "val_output.csv")
    xte, yte = load_split(args.data, "test_input.csv"), load_split(args.data, "test_output.csv")
    F, S, B = args.frame, args.stride, args.batch
    nframes = (xtr.shape[0] - F) // S + 1

    m = Gru(args.hidden)
    order = None
    if args.init:
        with open(args.init) as f:
            ex = json.load(f)
        if ex["frames"] != nframes or ex["hidden"] != args.hidden or ex["epochs"] < args.epochs:
            sys.exit("torch_recipe: %s does not match this run (frames %d, hidden %d, epochs %d)"
                     % (args.init, nframes, args.hidden, args.epochs))
        sd = {k: torch.tensor(v["data"], dtype=torch.float32).reshape(v["shape"])
              for k, v in ex["params"].items()}
        m.load_state_dict(sd, strict=True)
        order = [torch.tensor(o, dtype=torch.long) for o in ex["order"]]
    else:
        opendpd_init(m, args.hidden)

    opt = torch.optim.AdamW(m.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.01)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=5,
                                                       threshold=1e-4, min_lr=5e-5)
    loss_fn = nn.MSELoss()
    offs = torch.arange(F)
    for epoch in range(args.epochs):
        perm = order[epoch] if order is not None else torch.randperm(nframes)
        m.train()
        t0 = time.perf_counter()
        lsum, nb = 0.0, 0
        for b0 in range(0, nframes, B):
            idx = perm[b0:b0 + B]
            rows = (idx * S).unsqueeze(1) + offs  # (b, F) sample indices: gather, no frame copies
            xb, yb = xtr[rows], ytr[rows]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(m(xb), yb)
            loss.backward()
            nn.utils.clip_grad_norm_(m.parameters(), 200.0)
            opt.step()
            lsum += float(loss)
            nb += 1
        t1 = time.perf_counter()
        m.eval()
        val = evaluate(m, xva, yva, seglen)
        test = evaluate(m, xte, yte, seglen)
        t2 = time.perf_counter()
        sched.step(val)
        print(json.dumps({"epoch": epoch + 1, "train_s": t1 - t0, "eval_s": t2 - t1,
                          "loss": lsum / nb, "val_nmse_db": val, "test_nmse_db": test,
                          "lr": opt.param_groups[0]["lr"], "threads": torch.get_num_threads()}),
              flush=True)
    if not all(math.isfinite(v) for v in (val, test)):
        sys.exit("torch_recipe: non-finite NMSE")


if __name__ == "__main__":
    main()
