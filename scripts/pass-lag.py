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

With --phases, per phase of the iteration (forward, backward, optimizer step) instead: how long the compute
stream took for it (from the previous phase's last compute op's end to its own), predicted and measured on each
rank (the mean over the timed iterations), and of the measured time how much the compute ops ran (busy) and how
long the stream stood between them (idle). A phase that takes longer than predicted in every communicating plan
alike is the profile's; one whose miss grows with the plan's slicing is the model's. (On a CPU profile the
predicted spans are the ops' own times: what the compute loses beside a collective shows as idle there.)

Usage: scripts/pass-lag.py CONFIG PLAN [PLAN ...] [--rank R | --phases]
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


def phase_times(spans_of_iteration, t0):
    """Per phase: (end of its last compute op, the compute ops' summed time), both from t0."""
    end, busy = {}, {}
    for start, stop, phase in spans_of_iteration:
        end[phase] = max(end.get(phase, 0.0), stop - t0)
        busy[phase] = busy.get(phase, 0.0) + stop - start
    return end, busy


def report_phases(config, plan):
    ops = predicted_ops(os.path.join(config, "pred", plan + ".trace.json"))
    spans = iteration_spans(os.path.join(config, "meas", plan + ".trace.json"))
    compute = {op: e for op, e in ops.items() if e.get("tid", 0) == 0}
    phase = {op: e["args"].get("phase", "?") for op, e in compute.items()}
    order = []
    for e in sorted(compute.values(), key=lambda e: e["ts"]):
        if phase[e["args"]["op"]] not in order:
            order.append(phase[e["args"]["op"]])
    predicted_end, predicted_busy = phase_times(
        [(e["ts"], e["ts"] + e["dur"], phase[op]) for op, e in compute.items()], 0.0)
    ranks = sorted({s[0] for iteration in spans for s in iteration})
    measured = {r: [] for r in ranks}  # per rank, per iteration: (ends, busy)
    for iteration in spans:
        t0 = min(s[2] for s in iteration)
        for r in ranks:
            measured[r].append(phase_times(
                [(s[2], s[3], phase[s[1]]) for s in iteration if s[0] == r and s[1] in compute], t0))
    print(f"{plan} ({len(spans)} iterations): per phase, the compute stream's time, ms")
    print(f"  {'phase':<8} {'predicted':>9} {'busy':>7}" + "".join(f" {'rank ' + str(r):>9} {'busy':>7} {'idle':>7}" for r in ranks))
    for i, name in enumerate(order):
        before = order[i - 1] if i else None
        line = f"  {name:<8} {(predicted_end[name] - predicted_end.get(before, 0.0)) / 1e3:9.1f}"
        line += f" {predicted_busy[name] / 1e3:7.1f}"
        for r in ranks:
            took = [end.get(name, 0.0) - end.get(before, 0.0) if before else end.get(name, 0.0)
                    for end, _ in measured[r]]
            busy = [b.get(name, 0.0) for _, b in measured[r]]
            line += f" {statistics.mean(took) / 1e3:9.1f} {statistics.mean(busy) / 1e3:7.1f}"
            line += f" {(statistics.mean(took) - statistics.mean(busy)) / 1e3:7.1f}"
        print(line)


def main(argv):
    rank = 0
    phases = "--phases" in argv
    argv = [a for a in argv if a != "--phases"]
    if "--rank" in argv:
        i = argv.index("--rank")
        if i + 1 >= len(argv) or not argv[i + 1].isdigit():
            raise BadInput("--rank needs a rank number")
        rank = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    if len(argv) < 2:
        raise BadInput(USAGE)
    for plan in argv[1:]:
        if phases:
            report_phases(argv[0], plan)
        else:
            report(argv[0], plan, rank)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BadInput as e:
        print(f"pass-lag.py: {e}", file=sys.stderr)
        sys.exit(2)
