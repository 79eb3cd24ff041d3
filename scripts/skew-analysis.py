#!/usr/bin/env python3
"""skew-analysis.py: what the ranks' arrival skew at the collectives of measured multi-rank traces goes with.

For every collective of every measured trace (`<config>/meas/<plan>.trace.json` of a fidelity sweep), the skew
is the later rank's start minus the earlier rank's (as `domino-profile --calibrate --fit sync` takes it), set
against candidate explanations measured on the later rank:

  compute_since_sync   compute-stream busy time since the rank's last synchronisation point: the start of the
                       last compute op that waited on a collective (the trace's "wait" flows), or the
                       iteration's start, up to the collective's start
  compute_since_prev   compute-stream busy time between the previous collective's end and this start
  compute_since_prev_early  the same on the rank that arrived first (up to its own start): not inflated by
                       the late rank's own slowness
  predicted_compute_between  the compute-stream busy time between the previous collective's start and this
                       one's in the prediction (`<config>/pred/<plan>.trace.json`): what the simulator knows
  measured_compute_between  the compute-stream busy time between the previous collective's start and this
                       one's, the least over the ranks: what `--fit sync_growth` regresses the skew on
  since_iter_start     the collective's start in the iteration
  bytes                the message

Per plan it also gives the median *transfer*: a collective's last end minus its last start, the time it took
once every rank had arrived (no wait for a late peer in it), to set against the profile's time for the message.

and fits skew = a + b x (linear) and skew = a + b sqrt(x) per configuration (all its plans pooled), with the
share of the variance each explains (R^2). Also the per-plan median skew and median compute_since_sync.

Usage: scripts/skew-analysis.py SWEEP_DIR [CONFIG ...] [--json OUT.json] [--skip PLAN,...]
"""
import argparse
import bisect
import json
import math
import os
import statistics
import sys

COLLECTIVES = {"allreduce", "allgather", "reducescatter"}


def load_rank_events(path):
    with open(path) as f:
        trace = json.load(f)
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    flows = [e for e in trace["traceEvents"] if e.get("ph") == "f"]
    ranks = sorted({e["pid"] for e in events})
    per_rank = {}
    for r in ranks:
        compute = sorted(((e["ts"], e["ts"] + e["dur"]) for e in events if e["pid"] == r and e["tid"] == 0))
        colls = {e["args"]["op"]: e for e in events if e["pid"] == r and e["cat"] in COLLECTIVES}
        waits = sorted(e["ts"] for e in flows if e["pid"] == r and e["tid"] == 0)
        per_rank[r] = {"compute": compute, "colls": colls, "waits": waits}
    return trace, per_rank


def busy_between(intervals, lo, hi):
    return sum(max(0.0, min(e, hi) - max(s, lo)) for s, e in intervals if e > lo and s < hi)


def predicted_compute_between(pred_path):
    """Per collective op index: the predicted compute-stream busy time between the previous collective's start
    and this one's on the predicted rank (what the simulator can know from the schedule)."""
    if not os.path.exists(pred_path):
        return {}
    _, per_rank = load_rank_events(pred_path)
    rank = per_rank[min(per_rank)]
    out, prev_start = {}, 0.0
    for i, e in sorted(rank["colls"].items(), key=lambda kv: kv[1]["ts"]):
        out[i] = busy_between(rank["compute"], prev_start, e["ts"])
        prev_start = e["ts"]
    return out


def collective_rows(path, pred_path=None):
    predicted = predicted_compute_between(pred_path) if pred_path else {}
    trace, per_rank = load_rank_events(path)
    if len(per_rank) < 2:
        return []
    r0, r1 = sorted(per_rank)[:2]
    ids = sorted(set(per_rank[r0]["colls"]) & set(per_rank[r1]["colls"]),
                 key=lambda i: per_rank[r0]["colls"][i]["ts"])
    rows = []
    prev_end = 0.0
    prev_start = {r0: 0.0, r1: 0.0}
    for i in ids:
        a, b = per_rank[r0]["colls"][i], per_rank[r1]["colls"][i]
        between = [busy_between(per_rank[r]["compute"], prev_start[r], e["ts"]) for r, e in ((r0, a), (r1, b))]
        prev_start = {r0: a["ts"], r1: b["ts"]}
        late_rank = r0 if a["ts"] >= b["ts"] else r1
        late = per_rank[late_rank]
        early = per_rank[r1 if late_rank == r0 else r0]
        start = max(a["ts"], b["ts"])
        skew = abs(a["ts"] - b["ts"])
        k = bisect.bisect_right(late["waits"], start) - 1
        sync_point = late["waits"][k] if k >= 0 else 0.0
        rows.append({
            "op": i, "kind": a["cat"], "bytes": a["args"].get("bytes", 0.0), "skew": skew,
            "compute_since_sync": busy_between(late["compute"], sync_point, start),
            "compute_since_prev": busy_between(late["compute"], prev_end, start),
            "compute_since_prev_early": busy_between(early["compute"], prev_end, min(a["ts"], b["ts"])),
            "since_iter_start": start,
            "predicted_compute_between": predicted.get(i, float("nan")),
            "measured_compute_between": min(between),
            "transfer": max(a["ts"] + a["dur"], b["ts"] + b["dur"]) - start,
        })
        prev_end = max(a["ts"] + a["dur"], b["ts"] + b["dur"])
    return rows


def fit(xs, ys):
    """Least squares y = a + b x; returns a, b, R^2."""
    n = len(xs)
    if n < 3:
        return float("nan"), float("nan"), float("nan")
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 0 or syy <= 0:
        return my, 0.0, 0.0
    b = sxy / sxx
    a = my - b * mx
    return a, b, sxy * sxy / (sxx * syy)


def spearman(xs, ys):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        for pos, i in enumerate(order):
            r[i] = pos
        return r
    return math.sqrt(max(0.0, fit(ranks(xs), ranks(ys))[2])) * (1 if fit(ranks(xs), ranks(ys))[1] >= 0 else -1)


CANDIDATES = ["predicted_compute_between", "measured_compute_between", "compute_since_sync", "compute_since_prev", "compute_since_prev_early",
              "since_iter_start", "bytes"]


def analyse_config(sweep, config, skip):
    meas = os.path.join(sweep, config, "meas")
    plans = sorted(f[:-len(".trace.json")] for f in os.listdir(meas) if f.endswith(".trace.json"))
    rows, per_plan = [], {}
    for plan in plans:
        if plan in skip:
            continue
        pr = collective_rows(os.path.join(meas, plan + ".trace.json"),
                             os.path.join(sweep, config, "pred", plan + ".trace.json"))
        if not pr:
            continue
        for r in pr:
            r["plan"] = plan
        rows += pr
        per_plan[plan] = {
            "collectives": len(pr),
            "median_skew_us": statistics.median(r["skew"] for r in pr),
            "median_compute_since_sync_us": statistics.median(r["compute_since_sync"] for r in pr),
            "median_compute_since_prev_us": statistics.median(r["compute_since_prev"] for r in pr),
            "median_predicted_compute_between_us": statistics.median(r["predicted_compute_between"] for r in pr),
            "median_transfer_us": statistics.median(r["transfer"] for r in pr),
        }
    ys = [r["skew"] for r in rows]
    fits = {}
    for c in CANDIDATES:
        xs = [r[c] for r in rows]
        a, b, r2 = fit(xs, ys)
        sa, sb, sr2 = fit([math.sqrt(max(0.0, x)) for x in xs], ys)
        fits[c] = {"linear": {"a": a, "b": b, "r2": r2}, "sqrt": {"a": sa, "b": sb, "r2": sr2},
                   "spearman": spearman(xs, ys)}
    # Plan level: the per-plan median skew against the per-plan median compute since sync.
    px = [v["median_predicted_compute_between_us"] for v in per_plan.values()]
    py = [v["median_skew_us"] for v in per_plan.values()]
    a, b, r2 = fit(px, py)
    return {"collectives": len(rows), "median_skew_us": statistics.median(ys) if ys else float("nan"),
            "fits": fits, "plan_level": {"a": a, "b": b, "r2": r2}, "plans": per_plan}


def print_config(config, res):
    print(f"## {config}: {res['collectives']} collectives, median skew {res['median_skew_us']:.0f} us")
    print()
    print("| candidate x | linear: a us, b | R^2 | sqrt: a us, b | R^2 | Spearman |")
    print("|---|---|---:|---|---:|---:|")
    for c, f in res["fits"].items():
        lin, sq = f["linear"], f["sqrt"]
        print(f"| {c} | {lin['a']:.0f}, {lin['b']:.4g} | {lin['r2']:.2f} | {sq['a']:.0f}, {sq['b']:.4g} | "
              f"{sq['r2']:.2f} | {f['spearman']:.2f} |")
    pl = res["plan_level"]
    print()
    print(f"plan medians: skew = {pl['a']:.0f} us + {pl['b']:.4f} x predicted_compute_between, R^2 {pl['r2']:.2f}")
    print()
    print("| plan | collectives | median skew us | median compute since sync us | since previous collective us | "
          "predicted compute between us | median transfer us |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for plan, v in res["plans"].items():
        print(f"| {plan} | {v['collectives']} | {v['median_skew_us']:.0f} | {v['median_compute_since_sync_us']:.0f} | "
              f"{v['median_compute_since_prev_us']:.0f} | {v['median_predicted_compute_between_us']:.0f} | "
              f"{v['median_transfer_us']:.0f} |")
    print()


def sweep_configs(tool, sweep, named, holds):
    """The configurations to use: those named, else every folder of the sweep that holds `holds`; None (after
    saying why) when the sweep folder does not exist."""
    if not os.path.isdir(sweep):
        print(f"{tool}: no directory {sweep}", file=sys.stderr)
        return None
    return named or sorted(d for d in os.listdir(sweep) if os.path.exists(os.path.join(sweep, d, holds)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sweep")
    ap.add_argument("configs", nargs="*")
    ap.add_argument("--json")
    ap.add_argument("--skip", default="", help="comma-separated plans to leave out")
    args = ap.parse_args()
    configs = sweep_configs("skew-analysis", args.sweep, args.configs, "meas")
    if configs is None:
        return 2
    skip = set(filter(None, args.skip.split(",")))
    out = {}
    for config in configs:
        out[config] = analyse_config(args.sweep, config, skip)
        print_config(config, out[config])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
