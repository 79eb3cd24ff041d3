#!/usr/bin/env python3
"""comm-cost-breakdown.py: where a plan's communication cost goes, measured and predicted, from the traces of a
fidelity sweep run with --comm-cost (plain python3, standard library only).

A plan P and its comm-off run C (P+no-comm: the same compute ops, no collective) have the same compute. What
P takes beyond C, per rank and then averaged over the ranks, in points of C's iteration time:

  compute slower   P's compute ops' own time minus C's: compute slowed by the collectives beside it
                   (measured: the ops' mean durations over the typical iterations, what the median iteration
                   pays, else over every timed iteration, or their medians in traces without a mean; predicted:
                   always 0, the simulator's spans are an op's own time and what it loses beside a collective
                   is a gap)
  waits            compute-stream idle time before the ops that wait on a collective (the trace's "wait" flows):
                   communication the compute did not hide, and the ranks' arrival skew
  other gaps       the rest of the iteration: the stream's idle time between ops that wait on nothing (the
                   measured stall, the predicted loss beside a collective and the stall)

and beside them, not part of the sum, the collectives' own time: the communication stream's spans, which the
waits and the compute partly hide; measured as each collective's median over the timed iterations, as its mean
over them (traces that record it; "-" otherwise) and as it took in the iteration shown. The mean's excess over
the median is the collectives' tail: a collective that stalls for milliseconds in a few iterations keeps its
median, and an iteration of many collectives pays the mean.

The measured waits and other gaps come from the one iteration the trace shows (the median one); the compute
from the typical iterations (the middle half by time), by their means: an op preempted for milliseconds in a few iterations keeps its
median, and the sliced plans' compute ops beside collectives are preempted so (their means 7-18 % above their
medians at 2 Gbit/s, 2-7 % in the comm-off runs). Where the model's communication cost goes wrong is where
the two columns part.

A second table, measured only, relates the compute slowed to the collectives beside it: per plan, the MB of
collectives that ran beside compute (each collective's bytes times the share of its span with a compute op of
its rank running, in the iteration shown), the compute slower in ms (the first column of the table above, per
rank), and the two's ratio. A collective's threads take the core from the compute for the work they do, so
the loss follows the bytes more than the time beside.

A third table says where the waits go: per plan, the compute ops that waited on a collective, each layer's
copy of an op folded into one site (L*.fwd.mlp.add), with the four sites whose measured wait is furthest from
the predicted one (ms per iteration, per rank on average, in the iteration each trace shows).

  scripts/comm-cost-breakdown.py out/fidelity/cpu-gpt-loopback [more configuration folders]
"""
import json
import os
import re
import sys

from fidelity_comm_cost import comm_off_name, is_comm_off_run


def load(path):
    with open(path) as f:
        return json.load(f)


def compute_ops(trace, rank):
    """A rank's compute-stream ops in the trace's iteration, in start order, each with the stream's idle time
    before it when it waits on a collective (a "wait" flow ends at it), else None."""
    events = trace["traceEvents"]
    waits = {(e["pid"], e["ts"]) for e in events if e.get("ph") == "f" and e.get("tid") == 0}
    ops = sorted((e for e in events if e.get("ph") == "X" and e["pid"] == rank and e["tid"] == 0),
                 key=lambda e: e["ts"])
    end = 0.0
    for e in ops:
        yield e, (max(0.0, e["ts"] - end) if (rank, e["ts"]) in waits else None)
        end = e["ts"] + e["dur"]


def ranks_of(trace):
    return sorted({e["pid"] for e in trace["traceEvents"] if e.get("ph") == "X"})


def rank_parts(trace):
    """Per rank: (compute ops' time, idle before waiting ops, iteration time, collectives' time) of the trace's
    iteration."""
    events = trace["traceEvents"]
    iteration = trace["domino"]["iteration_time_us"]
    parts = {}
    for rank in ranks_of(trace):
        compute = waited = 0.0
        for e, idle in compute_ops(trace, rank):
            args = e["args"]
            compute += args.get("dur_typical_mean", args.get("dur_mean", args.get("dur_median", e["dur"])))
            waited += idle or 0.0
        comm = [e for e in events if e.get("ph") == "X" and e["pid"] == rank and e["tid"] == 1]
        means = [e["args"].get("dur_mean") for e in comm]
        collectives = (sum(e["args"].get("dur_median", e["dur"]) for e in comm),
                       sum(means) if None not in means else None, sum(e["dur"] for e in comm))
        parts[rank] = (compute, waited, iteration, collectives)
    return parts


def rank_differences(plan_trace, off_trace):
    """Per rank of both traces: ([compute slower, waits, other gaps, P's collectives (medians, means or None,
    as in the iteration shown)] in us, the comm-off iteration in us)."""
    p, c = rank_parts(plan_trace), rank_parts(off_trace)
    out = []
    for r in sorted(set(p) & set(c)):
        (pc, pw, pi, pcoll), (cc, cw, ci, _) = p[r], c[r]
        slower, waits = pc - cc, pw - cw
        out.append(([slower, waits, (pi - ci) - slower - waits, *pcoll], ci))
    return out


def breakdown(plan_trace, off_trace):
    """compute slower, waits, other gaps, their total (P over its comm-off run), and P's collectives (their
    medians, their means or None, and as in the iteration shown), each in % of the comm-off iteration."""
    per_rank = [[None if v is None else 100 * v / ci for v in values]
                for values, ci in rank_differences(plan_trace, off_trace)]
    if not per_rank:
        return None
    parts = [None if None in column else sum(column) / len(column) for column in zip(*per_rank)]
    return parts[:3] + [sum(parts[:3])] + parts[3:]


def mb_beside_compute(trace):
    """The collectives' MB that ran beside a compute op of their rank in the trace's iteration, per rank on
    average: each collective's bytes times the share of its span that compute overlapped."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    ranks = sorted({e["pid"] for e in events})
    total = 0.0
    for rank in ranks:
        compute = [(e["ts"], e["ts"] + e["dur"]) for e in events if e["pid"] == rank and e["tid"] == 0]
        for e in events:
            if e["pid"] != rank or e["tid"] != 1 or e["dur"] <= 0:
                continue
            start, end = e["ts"], e["ts"] + e["dur"]
            beside = sum(max(0.0, min(end, b) - max(start, a)) for a, b in compute)
            total += e["args"].get("bytes", 0) * min(1.0, beside / e["dur"]) / 1e6
    return total / len(ranks) if ranks else 0.0


def wait_sites(trace):
    """The compute stream's waits on collectives by the op that waited, its layer number folded (L3.fwd.mlp.add
    and L0.fwd.mlp.add are one site, L*.fwd.mlp.add): ms per iteration, per rank on average."""
    ranks = ranks_of(trace)
    sites = {}
    for rank in ranks:
        for e, idle in compute_ops(trace, rank):
            if idle:
                site = re.sub(r"^L\d+\.", "L*.", e["name"])
                sites[site] = sites.get(site, 0.0) + idle / 1000 / len(ranks)
    return sites


def print_wait_sites(config, plans, top):
    """Per plan ((file stem, name) pairs), the `top` wait sites whose measured wait is furthest from the
    predicted one."""
    print("| plan | waiting op (layers folded) | wait pred / meas, ms per iteration |")
    print("|---|---|---:|")
    for stem, plan in plans:
        paths = [os.path.join(config, side, stem + ".trace.json") for side in ("pred", "meas")]
        if not all(os.path.exists(path) for path in paths):
            continue
        pred, meas = (wait_sites(load(path)) for path in paths)
        worst = sorted(set(pred) | set(meas), key=lambda k: -abs(meas.get(k, 0.0) - pred.get(k, 0.0)))[:top]
        for site in worst:
            print(f"| {plan} | {site} | {pred.get(site, 0.0):.1f} / {meas.get(site, 0.0):.1f} |")
    print()


def compute_slower_ms(plan_trace, off_trace):
    """The plan's compute ops' time over its comm-off run's, in ms per rank on average."""
    slower = [values[0] for values, _ in rank_differences(plan_trace, off_trace)]
    return sum(slower) / len(slower) / 1000 if slower else None


def pairs(config):
    """(plan's file stem, its comm-off run's) for the plans of a configuration's measured folder."""
    meas = os.path.join(config, "meas")
    stems = {f[: -len(".trace.json")] for f in os.listdir(meas) if f.endswith(".trace.json")}
    for stem in sorted(stems):
        off = comm_off_name(stem)
        if not is_comm_off_run(stem) and off in stems:
            yield stem, off


def report(config):
    print(f"## {os.path.basename(os.path.normpath(config))}\n")
    losses, plans = [], []
    print("| plan | compute slower: pred / meas | waits: pred / meas | other gaps: pred / meas "
          "| communication cost: pred / meas | collectives' own time: pred / meas median / meas mean / meas this "
          "iteration |")
    print("|---|---:|---:|---:|---:|---:|")
    for stem, off in pairs(config):
        traces = {}
        for side in ("pred", "meas"):
            paths = [os.path.join(config, side, name + ".trace.json") for name in (stem, off)]
            if not all(os.path.exists(path) for path in paths):
                break
            traces[side] = [load(path) for path in paths]
        else:
            row = {side: breakdown(*pair) for side, pair in traces.items()}
            if row["pred"] is not None and row["meas"] is not None:
                plan = traces["meas"][0]["domino"].get("strategy", stem)
                print_row(plan, row)
                plans.append((stem, plan))
                losses.append((plan, mb_beside_compute(traces["meas"][0]), compute_slower_ms(*traces["meas"])))
    print()
    print_losses(losses)
    print_wait_sites(config, plans, top=4)


def print_losses(losses):
    print("| plan | collectives beside compute, MB | compute slower, ms | per MB beside, ms |")
    print("|---|---:|---:|---:|")
    for plan, mb, slower in losses:
        per_mb = f"{slower / mb:.2f}" if mb > 0 and slower is not None else "-"
        slower_text = "-" if slower is None else f"{slower:+.1f}"
        print(f"| {plan} | {mb:.1f} | {slower_text} | {per_mb} |")
    print()


def print_row(plan, row):
    cells = " | ".join(f"{row['pred'][i]:+.1f} / {row['meas'][i]:+.1f}" for i in range(4))
    mean = "-" if row["meas"][5] is None else f"{row['meas'][5]:.1f}"
    cells += f" | {row['pred'][4]:.1f} / {row['meas'][4]:.1f} / {mean} / {row['meas'][6]:.1f}"
    print(f"| {plan} | {cells} |")


def main(argv):
    if len(argv) >= 2 and argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(argv) < 2:
        print("usage: comm-cost-breakdown.py CONFIG_DIR [CONFIG_DIR ...] (--help: what it prints)", file=sys.stderr)
        return 2
    for config in argv[1:]:
        if not os.path.isdir(os.path.join(config, "meas")):
            print(f"comm-cost-breakdown: {config}: no meas/ folder (a fidelity sweep's configuration)",
                  file=sys.stderr)
            return 2
        try:
            report(config)
        except (OSError, ValueError, KeyError, TypeError) as e:  # a trace that is not a domino trace
            print(f"comm-cost-breakdown: {config}: unreadable trace ({type(e).__name__}: {e})", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
