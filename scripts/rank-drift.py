#!/usr/bin/env python3
"""rank-drift.py: what the ranks' drift would cost a plan, beside the constant wait the simulator charges.

The simulator runs one rank and charges every collective reached after compute the profile's constant wait for
the last rank (its arrival skew). On real ranks the compute of each runs at its own, varying speed, the ranks
drift apart between the points where they meet, and a collective starts when the last one arrives. This script
times a schedule's ops (`domino-sim --ops-json`) both ways, without the event loop's interference (every op at
its standalone time, so the figures are the drift's share, not an iteration's prediction):

  one-rank   one rank; a collective's start no earlier than its compute deps' end plus its arrival wait (the
             simulator's rule: a collective queued behind another pays only what is left of it)
  drifting   the plan's ranks (--ranks, default its TP degree), each compute op taking its duration plus a
             normal draw of variance D x duration on each rank apart (a random walk of D us^2 per us of
             compute: the gap after T us of compute has a spread that grows as sqrt(T)); a collective starts
             when the last rank arrives and ends on every rank together; the mean over --samples draws

D is given (--diffusion) or matched (--match OPS_JSON): the D with which that schedule (megatron-sync's, on
whose waits the profile's constant is fitted) takes as long drifting as on one rank, so that the plans are
compared at the same skew. Per plan: both times, their difference overall and per phase (the compute stream's
time in it), and the drifting ranks' mean wait at a collective (the last rank's arrival after the mean rank's).

Usage: scripts/rank-drift.py OPS_JSON [OPS_JSON ...] [--diffusion D | --match OPS_JSON] [--samples S]
                             [--ranks R] [--seed N]
Exit code 0, 2 on bad usage or an unreadable file.
"""
import json
import math
import random
import statistics
import sys
from collections import deque

USAGE = ("usage: scripts/rank-drift.py OPS_JSON [OPS_JSON ...] [--diffusion D | --match OPS_JSON] "
         "[--samples S] [--ranks R] [--seed N]")


class BadInput(Exception):
    pass


class Schedule:
    """A schedule's ops from domino-sim --ops-json, with each op's predecessor on its stream and a
    topological order over stream order and deps."""

    def __init__(self, path):
        try:
            with open(path) as f:
                data = json.load(f)
            self.ops = data["ops"]
            self.tp = int(data["tp"])
            self.plan = data.get("plan", path)
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise BadInput(f"{path}: not an ops file of domino-sim --ops-json ({e})")
        n = len(self.ops)
        self.prev, last = [-1] * n, {}
        for i, op in enumerate(self.ops):
            self.prev[i] = last.get(op["stream"], -1)
            last[op["stream"]] = i
        self.order = self._order(path)
        self.phases = list(dict.fromkeys(op["phase"] for op in self.ops if op["stream"] == "compute"))

    def _order(self, path):
        n = len(self.ops)
        indegree, successors = [0] * n, [[] for _ in range(n)]
        for i, op in enumerate(self.ops):
            for p in list(op["deps"]) + ([self.prev[i]] if self.prev[i] >= 0 else []):
                if not 0 <= p < n:
                    raise BadInput(f"{path}: op {i} depends on op {p}, which is not in the file")
                successors[p].append(i)
                indegree[i] += 1
        ready = deque(i for i in range(n) if indegree[i] == 0)
        order = []
        while ready:
            i = ready.popleft()
            order.append(i)
            for s in successors[i]:
                indegree[s] -= 1
                if indegree[s] == 0:
                    ready.append(s)
        if len(order) != n:
            raise BadInput(f"{path}: the deps form a cycle")
        return order


def time_once(schedule, ranks, diffusion, rng, constant_wait):
    """One draw: (iteration end, per phase the compute stream's end, the last rank's waits after the mean)."""
    ops, prev = schedule.ops, schedule.prev
    end = [None] * len(ops)
    waits = []
    for i in schedule.order:
        op = ops[i]
        ready = end[prev[i]] if prev[i] >= 0 else [0.0] * ranks
        deps = [max((end[d][r] for d in op["deps"]), default=0.0) for r in range(ranks)]
        if op["stream"] == "comm":
            wait = op["arrival_wait_us"] if constant_wait else 0.0
            arrive = [max(ready[r], deps[r] + wait) for r in range(ranks)]
            start = max(arrive)
            waits.append(start - statistics.mean(arrive))
            end[i] = [start + op["duration_us"]] * ranks
        else:
            d = op["duration_us"]
            spread = math.sqrt(diffusion * d) if diffusion > 0 else 0.0
            end[i] = [max(ready[r], deps[r]) + max(0.0, d + spread * rng.gauss(0, 1)) for r in range(ranks)]
    phase_end = {}
    for i, op in enumerate(ops):
        if op["stream"] == "compute":
            phase_end[op["phase"]] = max(phase_end.get(op["phase"], 0.0), max(end[i]))
    return max(max(e) for e in end), phase_end, waits


def time_schedule(schedule, ranks, diffusion, samples, seed, constant_wait=False):
    rng = random.Random(seed)
    draws = [time_once(schedule, ranks, diffusion, rng, constant_wait) for _ in range(samples)]
    phase_end = {p: statistics.mean(d[1][p] for d in draws) for p in schedule.phases}
    waits = [w for d in draws for w in d[2]]
    return statistics.mean(d[0] for d in draws), phase_end, statistics.mean(waits) if waits else 0.0


def phase_times(schedule, phase_end):
    """Each phase's time: from the previous phase's end to its own."""
    out, before = {}, 0.0
    for p in schedule.phases:
        out[p] = phase_end[p] - before
        before = phase_end[p]
    return out


def matched_diffusion(schedule, ranks, samples, seed):
    """The D with which `schedule` takes as long drifting as on one rank with the constant wait (bisection;
    the same draws at every D, so the time grows with D)."""
    target = time_schedule(schedule, 1, 0.0, 1, seed, constant_wait=True)[0]
    low, high = 0.0, 1.0
    while time_schedule(schedule, ranks, high, samples, seed)[0] < target:
        high *= 4
        if high > 1e7:
            raise BadInput(f"{schedule.plan}: no drift makes it as slow as its constant wait")
    for _ in range(30):
        mid = (low + high) / 2
        if time_schedule(schedule, ranks, mid, samples, seed)[0] < target:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def report(schedule, ranks, diffusion, samples, seed):
    one, one_end, _ = time_schedule(schedule, 1, 0.0, 1, seed, constant_wait=True)
    drift, drift_end, wait = time_schedule(schedule, ranks, diffusion, samples, seed)
    one_phase, drift_phase = phase_times(schedule, one_end), phase_times(schedule, drift_end)
    phases = " ".join(f"{p} {(drift_phase[p] - one_phase[p]) / 1e3:+.2f}" for p in schedule.phases)
    print(f"  {schedule.plan:<24} {one / 1e3:9.2f} {drift / 1e3:9.2f} {(drift - one) / 1e3:+8.2f} "
          f"{(drift - one) / one * 100:+6.2f}  {phases}  {wait:7.0f}")


def parse(argv):
    options = {"--diffusion": None, "--match": None, "--samples": "100", "--ranks": None, "--seed": "1"}
    files, i = [], 0
    while i < len(argv):
        if argv[i] in options:
            if i + 1 >= len(argv):
                raise BadInput(f"{argv[i]} needs a value")
            options[argv[i]] = argv[i + 1]
            i += 2
        elif argv[i].startswith("--"):
            raise BadInput(f"unknown option {argv[i]}\n{USAGE}")
        else:
            files.append(argv[i])
            i += 1
    if not files:
        raise BadInput(USAGE)
    if (options["--diffusion"] is None) == (options["--match"] is None):
        raise BadInput("give either --diffusion D or --match OPS_JSON\n" + USAGE)
    try:
        samples, seed = int(options["--samples"]), int(options["--seed"])
        ranks = int(options["--ranks"]) if options["--ranks"] else None
        diffusion = float(options["--diffusion"]) if options["--diffusion"] is not None else None
    except ValueError as e:
        raise BadInput(f"{e}\n{USAGE}")
    if samples < 1 or (ranks is not None and ranks < 1) or (diffusion is not None and not diffusion >= 0):
        raise BadInput("--samples and --ranks must be positive, --diffusion not negative")
    return files, options["--match"], diffusion, samples, ranks, seed


def main(argv):
    files, match, diffusion, samples, ranks, seed = parse(argv)
    schedules = [Schedule(f) for f in files]
    if match is not None:
        reference = Schedule(match)
        diffusion = matched_diffusion(reference, ranks or reference.tp, samples, seed)
        print(f"D {diffusion:.3g} us^2 per us of compute: {reference.plan} as slow drifting as with its "
              f"constant wait ({ranks or reference.tp} ranks, {samples} draws)")
    print(f"  {'plan':<24} {'one-rank':>9} {'drifting':>9} {'diff ms':>8} {'diff %':>6}  per phase, ms  "
          f"{'wait us':>7}")
    for schedule in schedules:
        report(schedule, ranks or schedule.tp, diffusion, samples, seed)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BadInput as e:
        print(f"rank-drift.py: {e}", file=sys.stderr)
        sys.exit(2)
