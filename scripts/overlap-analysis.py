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
import importlib.util
import json
import os
import sys
from collections import defaultdict

COLLECTIVES = ("allreduce", "allgather", "reducescatter")
MIN_SAMPLES = 8


def load_skew_analysis():
    """scripts/skew-analysis.py as a module (its file name is not an importable name): busy_between, fit."""
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("skew_analysis", os.path.join(here, "skew-analysis.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ANALYSIS = load_skew_analysis()


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
            busy = max((ANALYSIS.busy_between(iv, start, end) for iv in compute.values()), default=0.0)
            groups[(e["cat"], e.get("args", {}).get("bytes", 0))].append((e["dur"], busy))


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
        spans, busy = [s for s, _ in points], [b for _, b in points]
        if len(points) < MIN_SAMPLES or len(set(busy)) < 2:  # no spread of busy time: no slope to fit
            continue
        idle_needed, slope, _ = ANALYSIS.fit(busy, spans)
        mean_span, mean_busy = sum(spans) / len(spans), sum(busy) / len(busy)
        alone = sorted(s for s, b in points if b < 0.2 * s)
        alone_text = f"{alone[len(alone) // 2]:7.0f}" if alone else "    n/a"
        print(f"{kind:14s} {size / 1024:7.0f} KiB {len(points):4d} {slope:6.2f} {idle_needed:11.0f} {alone_text} "
              f"{mean_span:9.0f} {mean_busy:9.0f}")


if __name__ == "__main__":
    main(sys.argv)
