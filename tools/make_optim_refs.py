#!/usr/bin/python3
"""Reference vectors for distdpd's optimisers, gradient clipping and learning-rate
schedules, computed with PyTorch (1.13, CPU, float32) and read by tests/test_optim.c.

Writes tests/data/optim_ref.txt (text, one record per line):

  n N / steps S              parameter count and number of optimiser steps
  w0 v1..vN                  initial parameters (float32, %.9g round-trips exactly)
  g K v1..vN                 gradient of step K (1..S), shared by every optimiser case
  case NAME key=value...     optimiser case: kind, momentum, dampening, nesterov, beta1,
                             beta2, eps, wd (hyper-parameters, Python doubles)
  lr v1..vS                  learning rate used at each step of the case
  w K v1..vN                 parameters after step K
  clip NAME max_norm=X       clip_grad_norm_ case on gradient g 1 scaled by `scale`
  norm X / clipped v1..vN    torch's total norm and the clipped gradient
  sched NAME key=value...    lr schedule case (kind, base_lr, warmup, warmup_start, ...)
  metrics v1..vE             plateau: validation metric fed after each epoch
  lrs v1..vE                 the lr in force during epochs 0..E-1
  end                        closes a case

Usage: /usr/bin/python3 tools/make_optim_refs.py [output]   (run from the source root)
"""
import sys
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")
torch.set_num_threads(1)

N = 32       # a multiple of 16, so torch's AVX2 kernels take the vectorised path everywhere
STEPS = 10


def f32(v):
    return "%.9g" % float(np.float32(v))


def vec(a):
    return " ".join(f32(x) for x in np.asarray(a, dtype=np.float32).ravel())


def dbl(v):
    return repr(float(v))


def kv(cfg):
    """key=value pairs: strings and integers as they are, floats exactly (repr)."""
    return " ".join("%s=%s" % (k, v if isinstance(v, (str, int)) else dbl(v)) for k, v in cfg.items())


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "tests/data/optim_ref.txt"
    rng = np.random.default_rng(20240611)
    w0 = (rng.standard_normal(N) * 0.5).astype(np.float32)
    grads = []
    for k in range(STEPS):
        scale = [1.0, 0.3, 2.5, 0.01, 1.0, 4.0, 0.5, 0.05, 1.5, 0.8][k]
        g = (rng.standard_normal(N) * scale).astype(np.float32)
        if k in (2, 6):
            g[::7] = 0.0  # some exact zeros: Adam's moments decay without input
        grads.append(g)

    lines = []
    lines.append("# distdpd optimiser / clipping / lr-schedule references, torch %s, made by "
                 "tools/make_optim_refs.py" % torch.__version__)
    lines.append("n %d" % N)
    lines.append("steps %d" % STEPS)
    lines.append("w0 " + vec(w0))
    for k, g in enumerate(grads):
        lines.append("g %d %s" % (k + 1, vec(g)))

    const = lambda base: [base] * STEPS
    varying = lambda base: [base * (1.0 - 0.07 * k) for k in range(STEPS)]
    cases = [
        # name, kind, hyper-parameters, lr per step
        ("sgd_plain", "sgd", dict(), const(0.1)),
        ("sgd_wd", "sgd", dict(weight_decay=0.05), const(0.1)),
        ("sgd_momentum", "sgd", dict(momentum=0.9), const(0.05)),
        ("sgd_nesterov", "sgd", dict(momentum=0.9, nesterov=True), const(0.05)),
        ("sgd_damp_wd", "sgd", dict(momentum=0.8, dampening=0.3, weight_decay=0.01), const(0.05)),
        ("sgd_nesterov_wd_vlr", "sgd", dict(momentum=0.95, nesterov=True, weight_decay=1e-3),
         varying(0.03)),
        ("adam", "adam", dict(), const(1e-2)),
        ("adam_betas_wd", "adam", dict(betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1), const(3e-2)),
        ("adamw", "adamw", dict(weight_decay=0.01), const(1e-2)),
        ("adamw_vlr", "adamw", dict(betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1), varying(5e-3)),
        ("adamw_nowd", "adamw", dict(weight_decay=0.0, eps=1e-3), const(2e-2)),
    ]
    for name, kind, hp, lrs in cases:
        p = torch.nn.Parameter(torch.tensor(w0.copy()))
        if kind == "sgd":
            opt = torch.optim.SGD([p], lr=lrs[0], **hp)
        elif kind == "adam":
            opt = torch.optim.Adam([p], lr=lrs[0], **hp)
        else:
            opt = torch.optim.AdamW([p], lr=lrs[0], **hp)
        grp = opt.param_groups[0]
        b1, b2 = grp.get("betas", (0.9, 0.999))
        lines.append("case %s kind=%s momentum=%s dampening=%s nesterov=%d beta1=%s beta2=%s "
                     "eps=%s wd=%s" % (name, kind, dbl(grp.get("momentum", 0.0)),
                                       dbl(grp.get("dampening", 0.0)),
                                       int(grp.get("nesterov", False)), dbl(b1), dbl(b2),
                                       dbl(grp.get("eps", 1e-8)), dbl(grp["weight_decay"])))
        lines.append("lr " + " ".join(dbl(x) for x in lrs))
        for k in range(STEPS):
            grp["lr"] = lrs[k]
            p.grad = torch.tensor(grads[k].copy())
            opt.step()
            lines.append("w %d %s" % (k + 1, vec(p.detach().numpy())))
        lines.append("end")

    # clip_grad_norm_: clipped (norm above max), just above, and not clipped.
    for name, scale, max_norm in [("clip_big", 3.0, 1.0), ("clip_near", 1.0, None),
                                  ("clip_none", 0.5, 100.0)]:
        g = (grads[0] * np.float32(scale)).astype(np.float32)
        if max_norm is None:  # a max_norm a hair below the norm
            max_norm = float(np.linalg.norm(g.astype(np.float64))) * (1 - 1e-4)
        p = torch.nn.Parameter(torch.zeros(N))
        p.grad = torch.tensor(g.copy())
        total = torch.nn.utils.clip_grad_norm_([p], max_norm)
        lines.append("clip %s scale=%s max_norm=%s" % (name, dbl(scale), dbl(max_norm)))
        lines.append("norm " + dbl(total.item()))
        lines.append("clipped " + vec(p.grad.numpy()))
        lines.append("end")

    # Learning-rate schedules: the lr in force during each epoch 0..E-1.
    L = torch.optim.lr_scheduler

    def run(make, epochs, base, metrics=None):
        p = torch.nn.Parameter(torch.zeros(1))
        opt = torch.optim.SGD([p], lr=base)
        s = make(opt)
        out = []
        for e in range(epochs):
            out.append(opt.param_groups[0]["lr"])
            opt.step()
            if metrics is None:
                s.step()
            else:
                s.step(metrics[e])
        return out

    def seq(opt, w, s0, main):
        return L.SequentialLR(opt, [L.LinearLR(opt, start_factor=s0, total_iters=w), main(opt)],
                              milestones=[w])

    scheds = [
        ("constant", dict(kind="constant", base_lr=0.01), 6, lambda o: L.LambdaLR(o, lambda e: 1.0)),
        ("step", dict(kind="step", base_lr=0.1, step_size=3, gamma=0.5), 14,
         lambda o: L.StepLR(o, step_size=3, gamma=0.5)),
        ("step_gamma01", dict(kind="step", base_lr=0.05, step_size=1, gamma=0.1), 8,
         lambda o: L.StepLR(o, step_size=1, gamma=0.1)),
        ("cosine", dict(kind="cosine", base_lr=0.1, t_max=10, eta_min=1e-4), 31,
         lambda o: L.CosineAnnealingLR(o, T_max=10, eta_min=1e-4)),
        ("cosine_eta0", dict(kind="cosine", base_lr=2e-3, t_max=7, eta_min=0.0), 15,
         lambda o: L.CosineAnnealingLR(o, T_max=7)),
        ("warmup_constant", dict(kind="constant", base_lr=5e-3, warmup=5, warmup_start=0.2), 10,
         lambda o: L.LinearLR(o, start_factor=0.2, total_iters=5)),
        ("warmup_cosine", dict(kind="cosine", base_lr=0.1, t_max=8, eta_min=1e-3, warmup=4,
                               warmup_start=0.25), 20,
         lambda o: seq(o, 4, 0.25, lambda o2: L.CosineAnnealingLR(o2, T_max=8, eta_min=1e-3))),
        ("warmup_step", dict(kind="step", base_lr=0.02, step_size=2, gamma=0.7, warmup=3,
                             warmup_start=1.0 / 3.0), 12,
         lambda o: seq(o, 3, 1.0 / 3.0, lambda o2: L.StepLR(o2, step_size=2, gamma=0.7))),
    ]
    for name, cfg, epochs, make in scheds:
        lrs = run(make, epochs, cfg["base_lr"])
        lines.append("sched %s %s" % (name, kv(cfg)))
        lines.append("lrs " + " ".join(dbl(x) for x in lrs))
        lines.append("end")

    # ReduceLROnPlateau with metric sequences that exercise threshold, patience, cooldown,
    # min_lr and eps.
    m1 = [1.0, 0.9, 0.85, 0.85, 0.8500001, 0.84995, 0.86, 0.7, 0.7, 0.7, 0.7, 0.7, 0.69999,
          0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6]
    m2 = [0.1, 0.2, 0.2, 0.25, 0.2501, 0.26, 0.3, 0.3, 0.3, 0.1, 0.1, 0.1, 0.5, 0.5, 0.5,
          0.5, 0.5, 0.5, 0.5, 0.5]
    m3 = [5.0, 4.0, 4.0, 4.0, 3.95, 3.95, 3.95, 3.95, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0]
    plateaus = [
        ("plateau_min_rel", dict(kind="plateau", base_lr=0.1, mode_max=0, threshold_abs=0,
                                 factor=0.5, patience=2, threshold=1e-4, cooldown=1, min_lr=0.01,
                                 plateau_eps=1e-8), m1,
         dict(mode="min", factor=0.5, patience=2, threshold=1e-4, threshold_mode="rel",
              cooldown=1, min_lr=0.01, eps=1e-8)),
        ("plateau_max_abs", dict(kind="plateau", base_lr=0.05, mode_max=1, threshold_abs=1,
                                 factor=0.1, patience=1, threshold=0.01, cooldown=0, min_lr=0.0,
                                 plateau_eps=1e-8), m2,
         dict(mode="max", factor=0.1, patience=1, threshold=0.01, threshold_mode="abs",
              cooldown=0, min_lr=0.0, eps=1e-8)),
        ("plateau_min_abs_eps", dict(kind="plateau", base_lr=1e-3, mode_max=0, threshold_abs=1,
                                     factor=0.3, patience=0, threshold=0.1, cooldown=2,
                                     min_lr=5e-5, plateau_eps=4.5e-5), m3,
         dict(mode="min", factor=0.3, patience=0, threshold=0.1, threshold_mode="abs",
              cooldown=2, min_lr=5e-5, eps=4.5e-5)),
        ("plateau_max_rel", dict(kind="plateau", base_lr=0.2, mode_max=1, threshold_abs=0,
                                 factor=0.5, patience=3, threshold=0.05, cooldown=0, min_lr=0.0,
                                 plateau_eps=1e-8), m2,
         dict(mode="max", factor=0.5, patience=3, threshold=0.05, threshold_mode="rel",
              cooldown=0, min_lr=0.0, eps=1e-8)),
    ]
    for name, cfg, metrics, kw in plateaus:
        lrs = run(lambda o: L.ReduceLROnPlateau(o, **kw), len(metrics), cfg["base_lr"], metrics)
        lines.append("sched %s %s" % (name, kv(cfg)))
        lines.append("metrics " + " ".join(dbl(x) for x in metrics))
        lines.append("lrs " + " ".join(dbl(x) for x in lrs))
        lines.append("end")

    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s (%d lines)" % (out_path, len(lines)))


if __name__ == "__main__":
    main()
