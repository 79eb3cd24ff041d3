#!/usr/bin/env python3
"""aligned-collectives.py: how far apart the ranks start each collective, aligned or after compute.

For every configuration of a fidelity sweep (`<config>/pred/<plan>.trace.json` beside
`<config>/meas/<plan>.trace.json`), each collective of each plan is classed as the simulator classes it
(sim/engine/arrival_skew.hpp): "aligned" when its launch point (the position on the compute stream after the
last compute op it waits on, through its deps) is no later than the previous collective's, else "after
compute"; and, on the rank that started it last, "alone" (its compute stream busy for under 5 % of it) or
"beside" (over 70 %), else "part". Per class it prints the median gap between the two ranks' starts in the
traced iteration: what the simulator charges a collective after compute as the arrival skew (sync_us) and an
aligned one not at all.

Usage: scripts/aligned-collectives.py SWEEP_DIR [SWEEP_DIR ...]
"""
import glob
import json
import os
import statistics
import sys

COLLECTIVE_CODES = {"AllReduce", "AllGather", "ReduceScatter"}
ALONE, BESIDE = 0.05, 0.7


def spans(path):
    with open(path) as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def aligned_flags(pred):
    """Op index -> aligned, for the collectives of a predicted trace (rank 0), by its launch points."""
    ops = sorted((e for e in pred if e.get("pid", 0) == 0), key=lambda e: e["args"]["op"])
    launch, position = {}, 0
    for e in ops:
        if e["tid"] == 0:
            position += 1
            launch[e["args"]["op"]] = position
    for e in ops:
        if e["tid"] != 0:
            launch[e["args"]["op"]] = max([launch.get(d, 0) for d in e["args"].get("deps", [])] + [0])
    flags, previous = {}, 0
    for e in ops:
        if e["args"].get("code") in COLLECTIVE_CODES:
            at = launch[e["args"]["op"]]
            flags[e["name"]] = at <= previous
            previous = max(previous, at)
    return flags


def busy_share(compute, start, end):
    covered = sum(max(0.0, min(end, b) - max(start, a)) for a, b in compute)
    return covered / max(end - start, 1e-9)


def plan_rows(config, plan, rows):
    flags = aligned_flags(spans(os.path.join(config, "pred", plan + ".trace.json")))
    by_name, compute = {}, {}
    for e in spans(os.path.join(config, "meas", plan + ".trace.json")):
        by_name.setdefault(e["name"], {})[e["pid"]] = e
        if e["tid"] == 0:
            compute.setdefault(e["pid"], []).append((e["ts"], e["ts"] + e["dur"]))
    for name, aligned in flags.items():
        ranks = by_name.get(name, {})
        if len(ranks) != 2:
            continue
        first, last = sorted(ranks.values(), key=lambda e: e["ts"])
        share = busy_share(compute.get(last["pid"], []), last["ts"], last["ts"] + last["dur"])
        place = "alone" if share < ALONE else "beside" if share > BESIDE else "part"
        rows.setdefault(("aligned" if aligned else "after compute", place), []).append(last["ts"] - first["ts"])


def report(config):
    rows = {}
    for pred in sorted(glob.glob(os.path.join(config, "pred", "*.trace.json"))):
        plan = os.path.basename(pred)[: -len(".trace.json")]
        if os.path.exists(os.path.join(config, "meas", plan + ".trace.json")):
            plan_rows(config, plan, rows)
    print(os.path.basename(config))
    for (klass, place), gaps in sorted(rows.items()):
        print(f"  {klass:14s} {place:7s} {len(gaps):5d} collectives: start gap median {statistics.median(gaps):.0f} us")
    for klass in ("aligned", "after compute"):
        gaps = [g for (k, _), v in rows.items() if k == klass for g in v]
        if gaps:
            print(f"  {klass:14s} all     {len(gaps):5d} collectives: start gap median {statistics.median(gaps):.0f} us")


def main(argv):
    if not argv:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    for sweep in argv:
        configs = sorted(d for d in glob.glob(os.path.join(sweep, "*")) if os.path.isdir(os.path.join(d, "pred")))
        if not configs:
            print(f"aligned-collectives.py: {sweep}: no configuration with pred/ and meas/ traces", file=sys.stderr)
            return 2
        for config in configs:
            try:
                report(config)
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
                print(f"aligned-collectives.py: {config}: unreadable trace ({type(e).__name__}: {e})", file=sys.stderr)
                return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
