#!/usr/bin/env python3
"""Summary tables of bench/recipe_bench.sh: reads OUT_DIR, prints Markdown.

Usage: python3 bench/bench_report.py OUT_DIR      (standard library only; any python3)

Epoch time = training + evaluation of the validation and test splits, per epoch; the
median is over every epoch of every round. FLOPs per epoch are analytic:
dd_model_flops_per_sample (forward + backward, from bench_train's output) times the
training samples (frames x 200), plus forward FLOPs times the padded evaluation samples.
"""
import glob
import json
import math
import os
import statistics
import sys


def jl(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip().startswith("{")]


def j1(path):
    with open(path) as f:
        return json.load(f)


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def mb(kb):
    """kB (getrusage) -> MB (10^6 bytes)."""
    return kb * 1024 / 1e6


def fmt(x, nd=2):
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build/bench-results"
    m = j1(os.path.join(out, "machine.json"))
    p = print
    p(f"# distdpd benchmark ({m['date']})\n")
    p(f"Machine: {m['nproc']} CPUs, {m['cpu']}, AVX-512 {'yes' if m['avx512'] else 'no'}, "
      f"distdpd's SIMD path {m.get('simd', '?')}, OpenBLAS core {m.get('openblas_core', '?')}; "
      f"load average at start {m['load_start']}, at end "
      f"{open(os.path.join(out, 'load_end.txt')).read().strip()}. Data: {m['data']} ({m['data_kind']}, "
      f"{m['frames']} training frames). PyTorch: {m['torch_version'] if m['torch'] else 'not available, columns skipped'}.\n")

    # sgemm
    sg = j1(os.path.join(out, "sgemm.json"))
    sg5 = None
    if os.path.exists(os.path.join(out, "sgemm_avx512.json")):
        try:
            sg5 = j1(os.path.join(out, "sgemm_avx512.json"))
        except ValueError:
            sg5 = None
    peak = max(sg["gflops"], sg5["gflops"] if sg5 else 0)

    # scaling (best of the repeats per model/hidden)
    sc = {}
    for r in jl(os.path.join(out, "scaling.jsonl")):
        k = (r["model"], r["hidden"])
        if k not in sc or r["msamples_per_s"] > sc[k]["msamples_per_s"]:
            sc[k] = r
    fps = sc.get(("gru", 23), {}).get("flops_per_sample")

    # recipe
    with open(os.path.join(m["data"], "spec.json")) as f:
        nperseg = int(json.load(f).get("nperseg", 2560))
    neval = 0
    for split in ("val", "test"):
        with open(os.path.join(m["data"], f"{split}_input.csv")) as f:
            n = sum(1 for _ in f) - 1
        neval += -(-n // nperseg) * nperseg
    train_samples = m["frames"] * 200
    flops_epoch = fps * train_samples + fps / 3 * neval if fps else float("nan")

    dd_t, dd_nmse, dd_rss, th_t, th_nmse, th_rss = [], {}, [], [], {}, []
    seeds = sorted(int(os.path.basename(f)[3:-6]) for f in glob.glob(os.path.join(out, "dd_[0-9]*.jsonl")))
    for s in seeds:
        recs = jl(os.path.join(out, f"dd_{s}.jsonl"))
        dd_t += [r["time_s"] + r["eval_time_s"] for r in recs]
        dd_nmse[s] = recs[-1]["test_nmse_db"]
        dd_rss.append(j1(os.path.join(out, f"dd_rss_{s}.json"))["maxrss_kb"])
        tf = os.path.join(out, f"torch_{s}.jsonl")
        if os.path.exists(tf):
            tr = jl(tf)
            if tr:
                th_t += [r["train_s"] + r["eval_s"] for r in tr]
                th_nmse[s] = tr[-1]["test_nmse_db"]
                th_rss.append(j1(os.path.join(out, f"torch_rss_{s}.json"))["maxrss_kb"])
    t2 = []
    if os.path.exists(os.path.join(out, "torch2_0.jsonl")):
        t2 = [r["train_s"] + r["eval_s"] for r in jl(os.path.join(out, "torch2_0.jsonl"))]
    ddm, thm, t2m = med(dd_t), med(th_t), med(t2)
    E = m["epochs"]

    p("## Reference recipe: gru hidden 23, frame 200, stride 1, batch 64, AdamW lr 5e-3\n")
    p(f"Median over {len(seeds)} rounds x {E} epochs (alternating which tool runs first); epoch = "
      "training + evaluation of the validation and test splits. One core: OPENBLAS_NUM_THREADS=1, "
      "torch.set_num_threads(1).\n")
    p("| | distdpd (1 core) | PyTorch (1 thread) | PyTorch (2 threads) |")
    p("|---|---|---|---|")
    p(f"| epoch time, median (s) | {fmt(ddm, 3)} | {fmt(thm, 2)} | {fmt(t2m, 2)} |")
    p(f"| epoch times, min..max (s) | {fmt(min(dd_t) if dd_t else None, 3)}..{fmt(max(dd_t) if dd_t else None, 3)} | "
      f"{fmt(min(th_t) if th_t else None)}..{fmt(max(th_t) if th_t else None)} | "
      f"{fmt(min(t2) if t2 else None)}..{fmt(max(t2) if t2 else None)} |")
    p(f"| speed-up of distdpd | 1 | **{fmt(thm / ddm, 1)}x** | {fmt(t2m / ddm, 1)}{'x' if t2 else ''} |")
    p(f"| GFLOP/s (analytic FLOPs) | {fmt(flops_epoch / ddm * 1e-9, 1)} | {fmt(flops_epoch / thm * 1e-9, 2)} | "
      f"{fmt(flops_epoch / t2m * 1e-9, 2)} |")
    p(f"| peak RSS (MB) | {fmt(mb(med(dd_rss)), 1)} | {fmt(mb(med(th_rss)), 1)} | |")
    p("")
    p(f"FLOPs per epoch (analytic): {fmt(flops_epoch * 1e-9, 2)} GFLOP = {fps:.0f} FLOP/sample "
      f"(forward + backward, dd_model_flops_per_sample) x {train_samples} training samples + "
      f"{fps / 3:.0f} x {neval} evaluation samples.\n" if fps else "")
    p(f"Single-core sgemm peak ({sg['n']}^3, cblas_sgemm): {fmt(sg['gflops'], 1)} GFLOP/s with OpenBLAS's "
      f"detected kernel '{sg['core']}'" + (f"; {fmt(sg5['gflops'], 1)} GFLOP/s with its AVX-512 kernel "
                                           f"(OPENBLAS_CORETYPE={sg5['core']})" if sg5 else "") +
      f". distdpd reaches {fmt(100 * flops_epoch / ddm * 1e-9 / peak, 0)}% of the best.\n")

    # NMSE
    p(f"### Test NMSE after {E} epochs (same initial parameters and frame order per seed)\n")
    p("| seed | distdpd (dB) | PyTorch (dB) | difference (dB) |")
    p("|---|---|---|---|")
    diffs = []
    for s in seeds:
        d, t = dd_nmse.get(s), th_nmse.get(s)
        if t is not None:
            diffs.append(d - t)
        p(f"| {s} | {fmt(d)} | {fmt(t)} | {fmt(d - t if t is not None else None, 3)} |")
    if diffs:
        p(f"\nMean difference {statistics.mean(diffs):+.3f} dB, largest |difference| "
          f"{max(abs(x) for x in diffs):.3f} dB (target: within 0.3 dB).\n")

    # scaling
    p("## Throughput by model (training steps through the trainer, one core)\n")
    p("Time per sample should follow the FLOP count: the last column is (time per sample / "
      "FLOPs per sample) relative to gru 23 (1.0 = scales exactly as the FLOPs).\n")
    p("| model | hidden | parameters | FLOP/sample (fwd+bwd) | Msamples/s | GFLOP/s | time/FLOP vs gru 23 |")
    p("|---|---|---|---|---|---|---|")
    ref = sc.get(("gru", 23))
    for k in [("gru", 23), ("gru", 28), ("gru", 64), ("dgru", 23), ("tcn", 96), ("resnet", 12)]:
        r = sc.get(k)
        if not r:
            continue
        rel = (ref["gflops"] / r["gflops"]) if ref else float("nan")
        p(f"| {r['model']} | {r['hidden']} | {r['params']} | {r['flops_per_sample']:.0f} | "
          f"{fmt(r['msamples_per_s'], 2)} | {fmt(r['gflops'], 1)} | {fmt(rel, 2)} |")
    p("")

    # memory
    p("## Memory\n")
    nbytes = 0
    for split in ("train", "val", "test"):
        with open(os.path.join(m["data"], f"{split}_input.csv")) as f:
            nbytes += (sum(1 for _ in f) - 1) * 16  # input + output, 8 bytes each
    p(f"Recipe run: peak RSS {fmt(mb(med(dd_rss)), 1)} MB for a data set of "
      f"{fmt(nbytes / 1e6, 2)} MB in memory (complex64 input and output).\n")
    rf = os.path.join(out, "rss.jsonl")
    if os.path.exists(rf):
        rs = jl(rf)
        p("| samples | data set (MB) | peak RSS (MB) | RSS growth / data growth |")
        p("|---|---|---|---|")
        prev = None
        for r in rs:
            dmb = r["file_bytes"] / 1e6
            rss = mb(r["rss"]["maxrss_kb"])
            slope = ""
            if prev:
                slope = fmt((rss - prev[1]) / (dmb - prev[0]), 2)
            p(f"| {r['samples']} | {fmt(dmb, 1)} | {fmt(rss, 1)} | {slope} |")
            prev = (dmb, rss)
        if len(rs) > 1:
            a, b = rs[0], rs[-1]
            g = (b["rss"]["maxrss_kb"] - a["rss"]["maxrss_kb"]) * 1024 / (b["file_bytes"] - a["file_bytes"])
            p(f"\nRSS growth per byte of data from {a['samples']} to {b['samples']} samples: "
              f"**{g:.2f}** (target: <= ~1 beyond a fixed overhead: {'met' if g <= 1.1 else 'not met'}).")
        p("\nSimulated data (nperseg 32768, binary format, memory-mapped), frame stride 1000. "
          "The evaluation workspace grows with the number of evaluation segments up to "
          "eval_batch (16) of them, then stays fixed; beyond that the slope is the memory "
          "per byte of data.")


if __name__ == "__main__":
    main()
