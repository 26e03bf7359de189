#!/usr/bin/python3
"""Tables of the gradient compression benchmark (bench/compress_bench.sh).

usage: compress_table.py OUT
       compress_table.py --slow-link OUT     (bench/slow_link.sh; TARGET_DB, MARGIN_DB
                                              from the environment)

Reads OUT/runs.tsv (model, data, ranks, label, spec, epochs, wall_s, exit status, run
directory, seed; the last line of a run directory wins) and each run's metrics.jsonl and
parallel.json, and writes
  OUT/results.csv  one row per run (columns below)
  OUT/results.md   a table per (model, data, ranks, epochs), means over the seeds, and
                   a table of the issue's targets
and prints results.md. Standard library only.

Definitions (per run; deltas against `none` of the same model, data, ranks, epochs and seed):
  final_test_nmse_db    test NMSE after the last epoch
  best_test_nmse_db     lowest test NMSE over the epochs
  delta_final_db        final_test_nmse_db - that of `none` at the same model, data,
                        ranks, epochs and seed (positive = worse than uncompressed);
                        labels sgd-* (trained with SGD) against sgd-none
  delta_best_db         the same for best_test_nmse_db
  last3_test_nmse_db    mean test NMSE of the last 3 epochs (less sensitive to the
                        epoch-to-epoch fluctuation, ~0.2 dB late in the recipe)
  delta_last3_db        the same difference for last3_test_nmse_db
  ratio_mean            mean over epochs of metrics.jsonl's compression_ratio (dense
                        float32 bytes / compressed payload bytes, per epoch)
  ratio_last            the last epoch's (dgc: after warm-up)
  ratio_run             parallel.json rank0_compression.compression_ratio (whole run)
  comm_bytes_per_step   metrics.jsonl, last epoch: bytes each rank sent per step as the
                        data-parallel strategy counted them (mean over ranks)
  wire_bytes_per_step   parallel.json, rank 0, whole run: the compressor's own count of
                        the bytes it sent (rank0_compression.bytes_sent_per_step; for
                        `none` rank0_timing.bytes_sent_per_step)
  traffic_x             wire_bytes_per_step of `none` / this run's (less traffic than
                        dense), whole run (dgc: including the warm-up)
  last_bytes_per_step   estimated gradient bytes rank 0 sent per step in the last epoch:
                        wire_bytes_per_step * ratio_run / ratio_last (the compressor's
                        bytes scale with its payload; differs from the whole run only
                        for dgc's warm-up)
  traffic_last_x        last_bytes_per_step of `none` / this run's (dgc: after warm-up)
  compress_ms_per_step  compress_time_s / steps, mean over epochs, in ms (encode + decode,
                        mean over ranks)
  s_per_epoch           mean training time per epoch (time_s, rank 0, evaluation excluded)
  eval_s_per_epoch      mean evaluation time per epoch
  wall_s_per_epoch      process wall time (mpirun start to exit) / epochs
Targets (issue 6), on final test NMSE after the same epochs:
  dgc   traffic_last_x >= 270 (after warm-up; with the pair allgather the traffic
        reduction is about ratio_last * 2 / ranks: at 4 ranks half the ratio) and
        delta_final_db <= 0.5
  int8  ratio_last >= 3.9 (4x nominal; 3.94x with a float32 scale per 256 elements)
        and delta_final_db <= 0.1

--slow-link: OUT/runs.tsv has rate, layout, ranks, label, spec, epochs, wall_s, exit
status, run directory; per (rate, layout) the target is TARGET_DB, or the `none` run's
final test NMSE + MARGIN_DB (default 0.5); time_to_target_s = sum of time_s over the
epochs up to the first with test_nmse_db <= target (evaluation excluded); speedup =
dense time / this time (time to target, and seconds per epoch); link_bytes_per_step = the
bytes all hosts' eth0 sent during the run (runs.tsv column 10) / optimiser steps.
"""
import csv
import json
import math
import os
import sys

COLUMNS = [
    "model", "data", "ranks", "label", "spec", "epochs", "seed", "status",
    "final_test_nmse_db", "best_test_nmse_db", "last3_test_nmse_db", "delta_final_db", "delta_best_db",
    "delta_last3_db",
    "final_val_nmse_db", "ratio_mean", "ratio_last", "ratio_run",
    "comm_bytes_per_step", "wire_bytes_per_step", "traffic_x", "last_bytes_per_step", "traffic_last_x",
    "compress_ms_per_step", "s_per_epoch", "eval_s_per_epoch", "wall_s_per_epoch",
    "target", "target_pass", "run_dir",
]


def num(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f


def mean(xs):
    xs = [x for x in xs if not math.isnan(x)]
    return sum(xs) / len(xs) if xs else math.nan


def read_run(out, row):
    """Metrics of one run directory; status 'ok' or why not."""
    r = dict(row)
    d = os.path.join(out, row["run_dir"])
    r["run_dir"] = row["run_dir"]
    recs = []
    try:
        with open(os.path.join(d, "metrics.jsonl")) as f:
            for line in f:
                line = line.strip()
                if line:
                    recs.append(json.loads(line))
    except (OSError, ValueError) as e:
        r["status"] = "no metrics (%s)" % e.__class__.__name__
        return r
    par = {}
    try:
        with open(os.path.join(d, "parallel.json")) as f:
            par = json.load(f)
    except (OSError, ValueError):
        pass
    epochs = int(row["epochs"])
    if row["rc"] != "0":
        r["status"] = "exit %s" % row["rc"]
    elif len(recs) != epochs:
        r["status"] = "%d of %d epochs" % (len(recs), epochs)
    else:
        r["status"] = "ok"
    if not recs:
        return r
    test = [num(x.get("test_nmse_db")) for x in recs]
    r["final_test_nmse_db"] = test[-1]
    r["best_test_nmse_db"] = min(t for t in test if not math.isnan(t)) if any(not math.isnan(t) for t in test) else math.nan
    r["last3_test_nmse_db"] = mean(test[-3:])
    r["final_val_nmse_db"] = num(recs[-1].get("val_nmse_db"))
    r["ratio_mean"] = mean([num(x.get("compression_ratio")) for x in recs])
    r["ratio_last"] = num(recs[-1].get("compression_ratio"))
    r["comm_bytes_per_step"] = num(recs[-1].get("comm_bytes_per_step"))
    prev = 0
    cms = []
    for x in recs:
        steps = int(x.get("step", 0)) - prev
        prev = int(x.get("step", 0))
        c = num(x.get("compress_time_s"))
        if steps > 0 and not math.isnan(c):
            cms.append(1e3 * c / steps)
    r["compress_ms_per_step"] = mean(cms)
    r["s_per_epoch"] = mean([num(x.get("time_s")) for x in recs])
    r["eval_s_per_epoch"] = mean([num(x.get("eval_time_s")) for x in recs])
    r["wall_s_per_epoch"] = num(row["wall_s"]) / max(1, len(recs))
    rc = par.get("rank0_compression")
    if isinstance(rc, dict):
        r["ratio_run"] = num(rc.get("compression_ratio"))
        r["wire_bytes_per_step"] = num(rc.get("bytes_sent_per_step"))
    else:
        r["ratio_run"] = 1.0 if codec_name(row["spec"]) == "none" else math.nan
        r["wire_bytes_per_step"] = num(par.get("rank0_timing", {}).get("bytes_sent_per_step"))
    r["last_bytes_per_step"] = r["wire_bytes_per_step"] * r["ratio_run"] / r["ratio_last"] \
        if r["ratio_last"] > 0 else math.nan
    return r


def codec_name(spec):
    return spec.split(",")[0].split(" ")[0]


def target(r):
    """(target description, 'PASS'/'FAIL'/'') for the issue's targets."""
    name = codec_name(r["spec"])
    no_ef = "error-feedback off" in r["spec"] or "ef=0" in r["spec"]
    d = r.get("delta_final_db", math.nan)
    ratio = r.get("ratio_last", math.nan)
    if name == "dgc":
        t = r.get("traffic_last_x", math.nan)
        return ">=270x traffic, <=0.5 dB", verdict(t >= 270, d, 0.5, "traffic")
    if name == "int8" and not no_ef:
        return "4x (3.94), <=0.1 dB", verdict(ratio >= 3.9, d, 0.1)
    return "", ""


def verdict(ratio_ok, d, tol, what="ratio"):
    if math.isnan(d):
        return "? (no none run)"
    why = []
    if not ratio_ok:
        why.append(what)
    if d > tol:
        why.append("NMSE")
    return "PASS" if not why else "FAIL (%s)" % ", ".join(why)


def fmt(v, nd=2):
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        return "%.*f" % (nd, v)
    return str(v)


def fmt_ratio(v):
    if isinstance(v, float) and not math.isnan(v):
        return "%.2f" % v if v < 10 else "%.1f" % v if v < 100 else "%.0f" % v
    return ""


def fmt_bytes(v):
    if isinstance(v, float) and not math.isnan(v):
        return "%.0f" % v
    return ""


AGG = ["final_test_nmse_db", "best_test_nmse_db", "last3_test_nmse_db", "delta_final_db", "delta_best_db",
       "delta_last3_db", "final_val_nmse_db", "ratio_mean", "ratio_last", "ratio_run", "comm_bytes_per_step",
       "wire_bytes_per_step", "traffic_x", "last_bytes_per_step", "traffic_last_x", "compress_ms_per_step",
       "s_per_epoch", "eval_s_per_epoch", "wall_s_per_epoch"]


def aggregate(rs):
    """Mean over the seeds of one configuration (the runs that completed)."""
    ok = [r for r in rs if r["status"] == "ok"] or rs
    a = dict(ok[0])
    a["nseeds"] = len(ok)
    a["status"] = "ok" if all(r["status"] == "ok" for r in rs) else \
        "; ".join("seed %s: %s" % (r["seed"], r["status"]) for r in rs if r["status"] != "ok")
    for k in AGG:
        a[k] = mean([r.get(k, math.nan) for r in ok])
    a["target"], a["target_pass"] = target(a)
    return a


def main():
    if len(sys.argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    out = sys.argv[1]
    rows = {}
    names = ["model", "data", "ranks", "label", "spec", "epochs", "wall_s", "rc", "run_dir", "seed"]
    try:
        with open(os.path.join(out, "runs.tsv")) as f:
            for line in f:
                p = line.rstrip("\n").split("\t")
                if len(p) == 9:
                    p.append("0")
                if len(p) != 10:
                    continue
                row = dict(zip(names, p))
                rows.pop(row["run_dir"], None)
                rows[row["run_dir"]] = row  # the last line of a run wins
    except OSError as e:
        sys.stderr.write("compress_table.py: %s\n" % e)
        return 1
    runs = [read_run(out, row) for row in rows.values()]
    base = {}
    for r in runs:
        if r["label"] in ("none", "sgd-none") and r["status"] == "ok":
            base[(r["model"], r["data"], r["ranks"], r["epochs"], r["seed"], r["label"])] = r
    for r in runs:
        b = base.get((r["model"], r["data"], r["ranks"], r["epochs"], r["seed"], baseline_of(r["label"])))
        for k, dk in (("final_test_nmse_db", "delta_final_db"), ("best_test_nmse_db", "delta_best_db"),
                      ("last3_test_nmse_db", "delta_last3_db")):
            r[dk] = r.get(k, math.nan) - b[k] if b and k in r else math.nan
        wb = b.get("wire_bytes_per_step", math.nan) if b else math.nan
        w = r.get("wire_bytes_per_step", math.nan)
        r["traffic_x"] = wb / w if w and not math.isnan(w) and not math.isnan(wb) else math.nan
        lb = b.get("last_bytes_per_step", math.nan) if b else math.nan
        lw = r.get("last_bytes_per_step", math.nan)
        r["traffic_last_x"] = lb / lw if lw and not math.isnan(lw) and not math.isnan(lb) else math.nan
        r["target"], r["target_pass"] = target(r)

    # order: data, model (as first run), ranks, epochs, then the order of the labels (none first), seed
    order = {}
    first = {}
    for i, r in enumerate(rows.values()):
        order.setdefault(("l", r["label"]), i)
        first.setdefault(("d", r["data"]), len(first))
        first.setdefault(("m", r["model"]), len(first))

    def key(r):
        return (first[("d", r["data"])], first[("m", r["model"])], int(r["ranks"]), int(r["epochs"]),
                order[("l", r["label"])])
    runs.sort(key=lambda r: key(r) + (int(r["seed"]),))
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for r in runs:
            w.writerow([fmt(r.get(c, math.nan), 4) if isinstance(r.get(c), float) else r.get(c, "") for c in COLUMNS])

    # one line per configuration: the mean over its seeds
    confs = []
    for r in runs:
        if not confs or key(confs[-1][0]) != key(r):
            confs.append([r])
        else:
            confs[-1].append(r)
    agg = [aggregate(c) for c in confs]
    md = []
    env = os.path.join(out, "env.txt")
    if os.path.exists(env):
        md.append("```")
        with open(env) as f:
            md.extend(line.rstrip("\n") for line in f)
        md.append("```")
        md.append("")
    groups = []
    for r in agg:
        g = (r["data"], r["model"], r["ranks"], r["epochs"])
        if g not in groups:
            groups.append(g)
    for g in groups:
        data, model, ranks, epochs = g
        sub = [r for r in agg if (r["data"], r["model"], r["ranks"], r["epochs"]) == g]
        seeds = sorted({r["nseeds"] for r in sub})
        md.append("### %s on %s, %s rank%s, %s epoch%s%s" % (
            model, data, ranks, "" if ranks == "1" else "s", epochs, "" if epochs == "1" else "s",
            "" if seeds == [1] else ", mean over %s seeds" % "/".join(str(x) for x in seeds)))
        md.append("")
        md.append("| compressor | spec | test NMSE dB (final) | best | delta final | delta last 3 | ratio mean "
                  "| ratio last | wire B/step | traffic x | traffic x last | compress ms/step | s/epoch | target |")
        md.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for r in sub:
            tgt = ("%s %s" % (r["target_pass"], r["target"])).strip()
            st = "" if r["status"] == "ok" else " (%s)" % r["status"]
            md.append("| %s%s | `%s` | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                r["label"], st, r["spec"], fmt(r.get("final_test_nmse_db", math.nan)),
                fmt(r.get("best_test_nmse_db", math.nan)), sgn(r["delta_final_db"]), sgn(r["delta_last3_db"]),
                fmt_ratio(r.get("ratio_mean", math.nan)), fmt_ratio(r.get("ratio_last", math.nan)),
                fmt_bytes(r.get("wire_bytes_per_step", math.nan)), fmt_ratio(r.get("traffic_x", math.nan)),
                fmt_ratio(r.get("traffic_last_x", math.nan)),
                fmt(r.get("compress_ms_per_step", math.nan), 3), fmt(r.get("s_per_epoch", math.nan)), tgt))
        md.append("")
    if len(groups) > 1:
        md.append("### Summary: final test NMSE minus `none`'s, dB (last-epoch compression ratio)")
        md.append("")
        md.append("| compressor | ratio last | " + " | ".join("%s %s %sr %se" % (g[1], g[0], g[2], g[3]) for g in groups)
                  + " |")
        md.append("|---|---:|" + "---:|" * len(groups))
        labels = []
        for r in agg:
            if r["label"] not in labels:
                labels.append(r["label"])
        for lab in labels:
            cells = []
            ratios = []
            for g in groups:
                m = [r for r in agg if r["label"] == lab and (r["data"], r["model"], r["ranks"], r["epochs"]) == g]
                cells.append(sgn(m[0]["delta_final_db"]) if m else "")
                if m and not math.isnan(m[0].get("ratio_last", math.nan)):
                    ratios.append(m[0]["ratio_last"])
            rr = "%s-%s" % (fmt_ratio(min(ratios)), fmt_ratio(max(ratios))) if ratios and \
                fmt_ratio(min(ratios)) != fmt_ratio(max(ratios)) else (fmt_ratio(ratios[0]) if ratios else "")
            md.append("| %s | %s | %s |" % (lab, rr, " | ".join(cells)))
        md.append("")
    tg = [r for r in agg if r["target"]]
    if tg:
        md.append("### Targets (issue 6)")
        md.append("")
        md.append("DGC: last-epoch traffic (bytes sent per step) at least 270x below the dense run's and final test "
                  "NMSE at most 0.5 dB above `none` (sgd-* rows: above `sgd-none`); "
                  "int8: ratio 4x (3.94x with a float32 scale per 256 elements, accepted as >= 3.9) and at most "
                  "0.1 dB above `none`; same model, data, ranks, epochs and seed (means over seeds).")
        md.append("")
        md.append("| model | data | ranks | epochs | seeds | compressor | ratio last | traffic x last | delta final dB "
                  "| delta last 3 | result |")
        md.append("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---|")
        for r in tg:
            md.append("| %s | %s | %s | %s | %d | %s | %s | %s | %s | %s | %s |" % (
                r["model"], r["data"], r["ranks"], r["epochs"], r["nseeds"], r["label"],
                fmt_ratio(r.get("ratio_last", math.nan)), fmt_ratio(r.get("traffic_last_x", math.nan)),
                sgn(r["delta_final_db"]), sgn(r["delta_last3_db"]), r["target_pass"]))
        md.append("")
    text = "\n".join(md)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


def baseline_of(label):
    """The reference of a label: sgd-none for the sgd-* labels, none otherwise."""
    return "sgd-none" if label.startswith("sgd-") else "none"


def sgn(v):
    return ("%+.2f" % v) if isinstance(v, float) and not math.isnan(v) else ""


def slow_link(out):
    rows = []
    try:
        with open(os.path.join(out, "runs.tsv")) as f:
            for line in f:
                p = line.rstrip("\n").split("\t")
                if len(p) == 9:
                    p.append("")
                if len(p) == 10:
                    rows.append(dict(zip(["rate", "layout", "ranks", "label", "spec", "epochs", "wall_s", "rc",
                                          "run_dir", "link_bytes"], p)))
    except OSError as e:
        sys.stderr.write("compress_table.py: %s\n" % e)
        return 1
    target_env = os.environ.get("TARGET_DB", "")
    margin = float(os.environ.get("MARGIN_DB", "") or 0.5)
    runs = []
    for row in rows:
        r = read_run(out, dict(row, model="", data=""))
        recs = []
        try:
            with open(os.path.join(out, row["run_dir"], "metrics.jsonl")) as f:
                recs = [json.loads(x) for x in f if x.strip()]
        except (OSError, ValueError):
            pass
        r["recs"] = recs
        steps = int(recs[-1].get("step", 0)) if recs else 0
        r["link_bytes_per_step"] = num(row["link_bytes"]) / steps if steps else math.nan
        par = {}
        try:
            with open(os.path.join(out, row["run_dir"], "parallel.json")) as f:
                par = json.load(f)
        except (OSError, ValueError):
            pass
        t = par.get("rank0_timing", {}) if isinstance(par, dict) else {}
        r["exposed_ms_per_step"] = 1e3 * num(t.get("exposed_s_per_step"))
        runs.append(r)
    dense = {}
    for r in runs:
        if r["label"] == "none" and r["status"] == "ok":
            dense[(r["rate"], r["layout"])] = r
    for r in runs:
        d = dense.get((r["rate"], r["layout"]))
        if target_env:
            tgt = float(target_env)
        elif d:
            tgt = d["final_test_nmse_db"] + margin
        else:
            tgt = math.nan
        r["target_db"] = tgt
        cum = 0.0
        r["time_to_target_s"] = math.nan
        r["epochs_to_target"] = ""
        for x in r["recs"]:
            cum += num(x.get("time_s"))
            if not math.isnan(tgt) and num(x.get("test_nmse_db")) <= tgt:
                r["time_to_target_s"] = cum
                r["epochs_to_target"] = str(int(x.get("epoch", 0)))
                break
        r["train_s_total"] = cum if r["recs"] else math.nan
    for r in runs:
        d = dense.get((r["rate"], r["layout"]))
        r["speedup_target"] = (d["time_to_target_s"] / r["time_to_target_s"]
                               if d and not math.isnan(r["time_to_target_s"]) else math.nan)
        r["speedup_epoch"] = d["s_per_epoch"] / r["s_per_epoch"] if d and r.get("s_per_epoch") else math.nan
    cols = ["rate", "layout", "ranks", "label", "spec", "epochs", "status", "final_test_nmse_db", "target_db",
            "epochs_to_target", "time_to_target_s", "speedup_target", "s_per_epoch", "speedup_epoch",
            "exposed_ms_per_step", "wire_bytes_per_step", "link_bytes_per_step", "ratio_last", "compress_ms_per_step", "wall_s_per_epoch",
            "run_dir"]
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in runs:
            w.writerow([fmt(r.get(c, math.nan), 4) if isinstance(r.get(c), float) else r.get(c, "") for c in cols])
    md = []
    env = os.path.join(out, "env.txt")
    if os.path.exists(env):
        md.append("```")
        with open(env) as f:
            md.extend(line.rstrip("\n") for line in f)
        md.append("```")
        md.append("")
    groups = []
    for r in runs:
        if (r["rate"], r["layout"]) not in groups:
            groups.append((r["rate"], r["layout"]))
    for g in groups:
        sub = [r for r in runs if (r["rate"], r["layout"]) == g]
        h, s_ = g[1].split("x")
        tg = sub[0]["target_db"]
        md.append("### %s link, %s hosts x %s rank%s, %s epochs: target test NMSE %s dB" % (
            g[0], h, s_, "" if s_ == "1" else "s", sub[0]["epochs"], fmt(tg)))
        md.append("")
        md.append("| compressor | spec | test NMSE dB (final) | epochs to target | time to target s | speed-up "
                  "| s/epoch | speed-up/epoch | comm not hidden ms/step | wire B/step | link B/step | ratio last |")
        md.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in sub:
            st = "" if r["status"] == "ok" else " (%s)" % r["status"]
            ttt = fmt(r["time_to_target_s"]) if not math.isnan(r["time_to_target_s"]) else "not reached"
            md.append("| %s%s | `%s` | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                r["label"], st, r["spec"], fmt(r.get("final_test_nmse_db", math.nan)), r["epochs_to_target"] or "-",
                ttt, ("%.2fx" % r["speedup_target"]) if not math.isnan(r["speedup_target"]) else "",
                fmt(r.get("s_per_epoch", math.nan)),
                ("%.2fx" % r["speedup_epoch"]) if not math.isnan(r["speedup_epoch"]) else "",
                fmt(r["exposed_ms_per_step"]), fmt_bytes(r.get("wire_bytes_per_step", math.nan)),
                fmt_bytes(r.get("link_bytes_per_step", math.nan)), fmt_ratio(r.get("ratio_last", math.nan))))
        md.append("")
    text = "\n".join(md)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--slow-link":
        sys.exit(slow_link(sys.argv[2]))
    sys.exit(main())
