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

A second table sets apart what a collective's size does from what its thread's sleep does: for the collectives
that ran at least 80 % beside compute, their span over their size's `alone` (the stretch), by how long their
stream had stood idle before they started (the communication thread's sleep: Linux lets a thread that slept
longer in sooner). If the stretch moves along a row, the sleep sets a collective's pace beside compute; if it
moves down the column of sizes only, the size does.

A third tells who gets the core at a hand-over: a compute op that stood waiting for a collective, whose
communication stream has its next collective ready as that one ends. Both threads want the core then; per
hand-over the compute op's start after the collective's end and the next collective's start after it, and
how often the collective went first. Beside it the compute op's start where the communication stream had
nothing ready (the compute thread wakes to a free core). Needs the traces' `deps` (docs/trace-format.md).

  scripts/overlap-analysis.py out/fidelity/cpu-gpt-loopback [more configs or .trace.json files]
"""
import bisect
import glob
import importlib.util
import json
import math
import os
import sys
from collections import defaultdict

COLLECTIVES = ("allreduce", "allgather", "reducescatter")
MIN_SAMPLES = 8
BESIDE = 0.8  # a collective with this share of its span busy ran beside compute
SLEEP_BINS_US = (0, 1000, 3000, 6000, 12000)  # the communication thread's sleep before a collective
MIN_CELL = 4  # collectives per stretch cell shown
WAKE_SLACK_US = 50  # a compute stream idle for less than this before a collective's end was not waiting


def load_skew_analysis():
    """scripts/skew-analysis.py as a module (its file name is not an importable name): busy_between, fit."""
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("skew_analysis", os.path.join(here, "skew-analysis.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ANALYSIS = load_skew_analysis()


def samples_of(trace_path, groups, handovers):
    with open(trace_path, encoding="utf-8") as f:
        events = [e for e in json.load(f).get("traceEvents", []) if e.get("ph") == "X"]
    for rank in {e["pid"] for e in events}:
        handovers_of([e for e in events if e["pid"] == rank], handovers)
    compute = defaultdict(list)  # rank -> compute-stream op intervals (a collective there is not compute)
    for e in events:
        if e.get("tid") == 0 and e.get("cat") not in COLLECTIVES:
            compute[e["pid"]].append((e["ts"], end_of(e)))
    previous_end = {}  # rank -> when its communication stream's last op ended
    for e in sorted(events, key=lambda e: e["ts"]):
        if e.get("cat") in COLLECTIVES:
            start, end = e["ts"], end_of(e)
            busy = max((ANALYSIS.busy_between(iv, start, end) for iv in compute.values()), default=0.0)
            slept = start - previous_end[e["pid"]] if e["pid"] in previous_end else None
            groups[(e["cat"], e.get("args", {}).get("bytes", 0))].append((e["dur"], busy, slept))
        if e.get("tid") == 1:
            previous_end[e["pid"]] = max(previous_end.get(e["pid"], 0.0), end_of(e))


def end_of(e):
    return e["ts"] + e["dur"]


def handovers_of(events, out):
    """A rank's compute ops that stood waiting for a collective: (next collective ready, compute op's lag after
    the collective's end, next collective's lag after it) into out[ready]."""
    by_op = {e["args"]["op"]: e for e in events if "op" in e.get("args", {})}
    compute = sorted((e for e in events if e.get("tid") == 0), key=lambda e: e["ts"])
    comm = sorted((e for e in events if e.get("tid") == 1), key=lambda e: e["ts"])
    following = {a["args"].get("op"): b for a, b in zip(comm, comm[1:])}
    for before, op in zip(compute, compute[1:]):
        waited = [by_op[d] for d in op["args"].get("deps", []) if d in by_op and by_op[d].get("tid") == 1]
        if not waited:
            continue
        collective = max(waited, key=end_of)
        nxt = following.get(collective["args"].get("op"))
        if nxt is None or end_of(before) > end_of(collective) - WAKE_SLACK_US:  # the stream was not waiting
            continue
        its_deps = [end_of(by_op[d]) for d in nxt["args"].get("deps", []) if d in by_op]
        ready = max(its_deps, default=-math.inf) <= end_of(collective) + 1
        out[ready].append((op["ts"] - end_of(collective), nxt["ts"] - end_of(collective)))


def print_handovers(handovers):
    print("\nhand-overs: a compute op waiting for a collective as it ends (us after its end)")
    print(f"{'next collective':16s} {'n':>5s} {'collective first':>16s} {'compute start: mean':>19s} {'median':>7s} "
          f"{'next collective start: mean':>27s} {'median':>7s}")
    for ready, label in ((True, "ready"), (False, "not ready")):
        rows = handovers.get(ready, [])
        if not rows:
            continue
        compute, comm = [c for c, _ in rows], [m for _, m in rows]
        first = sum(m < c for c, m in rows) / len(rows)
        print(f"{label:16s} {len(rows):5d} {first:16.0%} {sum(compute) / len(rows):19.0f} {median(compute):7.0f} "
              f"{sum(comm) / len(rows):27.0f} {median(comm):7.0f}")


def traces(args):
    for arg in args:
        if os.path.isdir(arg):
            yield from sorted(glob.glob(os.path.join(arg, "meas", "*.trace.json")))
        else:
            yield arg


def fail(message):
    """Bad usage or input: the message on stderr, exit code 2."""
    print("overlap-analysis: " + message, file=sys.stderr)
    sys.exit(2)


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    groups, handovers = defaultdict(list), defaultdict(list)
    files = list(traces(argv[1:]))
    if not files:
        fail("no measured traces under " + " ".join(argv[1:]))
    for path in files:
        try:
            samples_of(path, groups, handovers)
        except (OSError, ValueError, KeyError, TypeError) as e:  # missing, or not a domino trace
            fail(f"{path}: unreadable trace ({type(e).__name__}: {e})")
    print(f"{len(files)} traces; span = idle_needed + slope x busy, per collective and message size (us)")
    print(f"{'collective':14s} {'message':>10s} {'n':>4s} {'slope':>6s} {'idle_needed':>11s} {'alone':>7s} "
          f"{'mean span':>9s} {'mean busy':>9s}")
    for (kind, size), points in sorted(groups.items()):
        spans, busy = [s for s, _, _ in points], [b for _, b, _ in points]
        if len(points) < MIN_SAMPLES or len(set(busy)) < 2:  # no spread of busy time: no slope to fit
            continue
        idle_needed, slope, _ = ANALYSIS.fit(busy, spans)
        mean_span, mean_busy = sum(spans) / len(spans), sum(busy) / len(busy)
        alone = alone_span(points)
        alone_text = f"{alone:7.0f}" if alone else "    n/a"
        print(f"{kind:14s} {size / 1024:7.0f} KiB {len(points):4d} {slope:6.2f} {idle_needed:11.0f} {alone_text} "
              f"{mean_span:9.0f} {mean_busy:9.0f}")
    print_stretch_by_sleep(groups)
    print_handovers(handovers)


def alone_span(points):
    """The median span of a size's collectives with under 20 % of their span busy, or None."""
    alone = [s for s, b, _ in points if b < 0.2 * s]
    return median(alone) if alone else None


def median(values):
    """The upper median (an element of values, as the tables have always shown)."""
    values = sorted(values)
    return values[len(values) // 2]


def print_stretch_by_sleep(groups):
    edges = list(SLEEP_BINS_US) + [float("inf")]
    heads = [f"{lo / 1000:g}-{hi / 1000:g} ms" if hi != float("inf") else f">= {lo / 1000:g} ms"
             for lo, hi in zip(edges, edges[1:])]
    print(f"\nstretch (span / alone) of the collectives at least {BESIDE:.0%} beside compute, median (n), by their "
          "thread's sleep before")
    print(f"{'collective':14s} {'message':>10s} " + " ".join(f"{h:>14s}" for h in heads))
    for (kind, size), points in sorted(groups.items()):
        alone = alone_span(points)
        if not alone:
            continue
        cells = [[] for _ in heads]
        for span, busy, slept in points:
            if slept is not None and busy >= BESIDE * span:
                cells[bisect.bisect_right(SLEEP_BINS_US, max(slept, 0.0)) - 1].append(span / alone)
        if sum(len(c) >= MIN_CELL for c in cells) == 0:
            continue
        text = [f"{median(c):6.2f} ({len(c):4d})" if len(c) >= MIN_CELL else f"{'-':>14s}" for c in cells]
        print(f"{kind:14s} {size / 1024:7.0f} KiB " + " ".join(f"{t:>14s}" for t in text))


if __name__ == "__main__":
    main(sys.argv)
