#!/usr/bin/env python3
"""pass-lag.py: where along the pass a plan's measured iteration falls behind (or ahead of) its prediction.

For one configuration of a fidelity sweep (`CONFIG/pred/<plan>.trace.json` beside `CONFIG/meas/<plan>.trace.json`,
the measured trace with every timed iteration's spans), per plan and per block of its compute stream in the
predicted order (a layer's forward or backward, the embedding and head, the optimizer step):

  lag_ms     the block's last compute op's end in the iteration, measured (the mean over the timed iterations,
             on the rank named, times from the iteration's first start) less predicted; it grows where the
             plan loses time the model does not charge, and shrinks where the model charges time it does
             not lose
  gap_us     the largest, over the block's collectives, of the median gap between the two ranks' starts (over
             the iterations): how far the ranks have drifted apart when they reach the block's collectives
  wait_us    the wait for the last rank that the prediction charged those collectives (their mean)

An iteration whose ranks stay in step keeps gap_us near the profile's arrival skew along the whole pass; one
whose compute stream never waits for a collective lets the ranks drift apart, and its gaps grow pass by pass.

Usage: scripts/pass-lag.py CONFIG PLAN [PLAN ...] [--rank R]
Exit code 0, 2 on bad usage or an unreadable trace.
"""
import json
import os
import statistics
import sys

USAGE = "usage: scripts/pass-lag.py CONFIG PLAN [PLAN ...] [--rank R]"
COLLECTIVES = {"AllReduce", "AllGather", "ReduceScatter"}


class BadInput(Exception):
    pass


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise BadInput(f"{path}: unreadable trace ({e})")


def predicted_ops(path):
    """The prediction's spans of rank 0 (the simulator times one rank: all ranks are symmetric)."""
    ops = {}
    for e in load(path).get("traceEvents", []):
        if e.get("ph") != "X" or e.get("pid", 0) != 0 or "op" not in e.get("args", {}):
            continue
        ops[e["args"]["op"]] = e
    if not ops:
        raise BadInput(f"{path}: no predicted spans")
    return ops


def iteration_spans(path):
    spans = load(path).get("domino", {}).get("iteration_spans")
    if not spans:
        raise BadInput(f"{path}: no per-iteration spans (a measured trace of domino-exec with timed iterations)")
    return spans


def block_of(e):
    args = e["args"]
    layer = args.get("layer", -1)
    return f"{args.get('phase', '?')} {'layer ' + str(layer) if layer >= 0 else args.get('block', '-')}"


def measured_times(spans, rank, ops):
    """Per op: the mean end on `rank` and, for collectives, the ranks' start gaps (both from each iteration's
    first start)."""
    ends, starts = {}, {}
    for iteration in spans:
        t0 = min(s[2] for s in iteration)
        for r, op, start, end in iteration:
            if op not in ops:
                continue
            starts.setdefault(op, {}).setdefault(r, []).append(start - t0)
            if r == rank:
                ends.setdefault(op, []).append(end - t0)
    gaps = {}
    for op, by_rank in starts.items():
        if len(by_rank) == 2:
            a, b = by_rank.values()
            gaps[op] = [abs(x - y) for x, y in zip(a, b)]
    return {op: statistics.mean(v) for op, v in ends.items()}, gaps


def blocks(ops):
    """The compute stream's blocks in predicted order: (name, last compute op, collectives of the block)."""
    out = []
    for e in sorted(ops.values(), key=lambda e: e["ts"]):
        name = block_of(e)
        if not out or out[-1][0] != name:
            out.append([name, None, []])
        if e["args"].get("code") in COLLECTIVES:
            out[-1][2].append(e["args"]["op"])
        elif e.get("tid", 0) == 0:
            out[-1][1] = e["args"]["op"]
    return [b for b in out if b[1] is not None or b[2]]


def report(config, plan, rank):
    ops = predicted_ops(os.path.join(config, "pred", plan + ".trace.json"))
    spans = iteration_spans(os.path.join(config, "meas", plan + ".trace.json"))
    end, gaps = measured_times(spans, rank, ops)
    print(f"{plan} (rank {rank}, {len(spans)} iterations)")
    print(f"  {'block':<24} {'lag_ms':>8} {'gap_us':>8} {'wait_us':>8}")
    for name, last, collectives in blocks(ops):
        lag = f"{(end[last] - ops[last]['ts'] - ops[last]['dur']) / 1e3:+8.2f}" if last in end else f"{'-':>8}"
        block_gaps = [statistics.median(gaps[op]) for op in collectives if gaps.get(op)]
        gap = f"{max(block_gaps):8.0f}" if block_gaps else f"{'-':>8}"
        waits = [ops[op]["args"].get("arrival_wait_us", 0) for op in collectives]
        wait = f"{statistics.mean(waits):8.0f}" if waits else f"{'-':>8}"
        print(f"  {name:<24} {lag} {gap} {wait}")


def main(argv):
    rank = 0
    if "--rank" in argv:
        i = argv.index("--rank")
        if i + 1 >= len(argv) or not argv[i + 1].isdigit():
            raise BadInput("--rank needs a rank number")
        rank = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    if len(argv) < 2:
        raise BadInput(USAGE)
    for plan in argv[1:]:
        report(argv[0], plan, rank)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BadInput as e:
        print(f"pass-lag.py: {e}", file=sys.stderr)
        sys.exit(2)
