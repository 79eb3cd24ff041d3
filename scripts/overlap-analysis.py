#!/usr/bin/env python3
"""overlap-analysis.py: how far a collective progresses while its ranks compute, from measured traces.

For every collective of every measured trace (`<config>/meas/<plan>.trace.json` of a fidelity sweep, or trace
files named on the command line), its span (start to end on its rank) is set against the compute-stream
busy time inside that span, the larger over the ranks. Per (kind, message size), a least-squares line

    span = idle_needed + slope x busy

says how the collective lives beside compute. A collective of time T alone that progresses at 1 / (1 +
slowdown) beside compute (the flat interference model) ends when idle + busy / (1 + slowdown) = T: slope
slowdown / (1 + slowdown), idle_needed T. Slope 1 means it moves only while the compute streams stand idle
(its threads share the compute thread's core and wait for it); slope 0 that it runs beside compute as fast as
alone. `alone` is the median span of the collectives with under 20 % of their span busy.

  scripts/overlap-analysis.py out/fidelity/cpu-gpt-loopback [more configs or .trace.json files]
"""
import glob
import json
import os
import sys
from collections import defaultdict

COLLECTIVES = ("allreduce", "allgather", "reducescatter")
MIN_SAMPLES = 8


def busy_within(intervals, start, end):
    return sum(max(0.0, min(end, b) - max(start, a)) for a, b in intervals)


def samples_of(trace_path, groups):
    with open(trace_path, encoding="utf-8") as f:
        events = [e for e in json.load(f).get("traceEvents", []) if e.get("ph") == "X"]
    compute = defaultdict(list)  # rank -> compute-stream op intervals (a collective there is not compute)
    for e in events:
        if e.get("tid") == 0 and e.get("cat") not in COLLECTIVES:
            compute[e["pid"]].append((e["ts"], e["ts"] + e["dur"]))
    for e in events:
        if e.get("cat") in COLLECTIVES:
            start, end = e["ts"], e["ts"] + e["dur"]
            busy = max((busy_within(iv, start, end) for iv in compute.values()), default=0.0)
            groups[(e["cat"], e.get("args", {}).get("bytes", 0))].append((e["dur"], busy))


def line(points):
    n = len(points)
    mean_busy = sum(b for _, b in points) / n
    mean_span = sum(s for s, _ in points) / n
    sxx = sum((b - mean_busy) ** 2 for _, b in points)
    if sxx <= 0:
        return None
    slope = sum((b - mean_busy) * (s - mean_span) for s, b in points) / sxx
    return slope, mean_span - slope * mean_busy, mean_span, mean_busy


def traces(args):
    for arg in args:
        if os.path.isdir(arg):
            yield from sorted(glob.glob(os.path.join(arg, "meas", "*.trace.json")))
        else:
            yield arg


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    groups = defaultdict(list)
    files = list(traces(argv[1:]))
    if not files:
        sys.exit("overlap-analysis: no measured traces under " + " ".join(argv[1:]))
    for path in files:
        samples_of(path, groups)
    print(f"{len(files)} traces; span = idle_needed + slope x busy, per collective and message size (us)")
    print(f"{'collective':14s} {'message':>10s} {'n':>4s} {'slope':>6s} {'idle_needed':>11s} {'alone':>7s} "
          f"{'mean span':>9s} {'mean busy':>9s}")
    for (kind, size), points in sorted(groups.items()):
        fit = line(points) if len(points) >= MIN_SAMPLES else None
        if fit is None:
            continue
        slope, idle_needed, mean_span, mean_busy = fit
        alone = sorted(s for s, b in points if b < 0.2 * s)
        alone_text = f"{alone[len(alone) // 2]:7.0f}" if alone else "    n/a"
        print(f"{kind:14s} {size / 1024:7.0f} KiB {len(points):4d} {slope:6.2f} {idle_needed:11.0f} {alone_text} "
              f"{mean_span:9.0f} {mean_busy:9.0f}")


if __name__ == "__main__":
    main(sys.argv)
