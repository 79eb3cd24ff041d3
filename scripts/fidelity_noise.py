"""fidelity_noise.py: how many interleaved rounds a launch needs for its split-half noise floor to reach a
target (plain python3, standard library only; used by fidelity-table.py).

  python3 scripts/fidelity_noise.py [--json] LAUNCH/interleave.json
      the outlook of one interleaved domino-exec launch (--plans): each plan's round-to-round spread, the
      floor expected at its rounds and the rounds the targets take. Exit 2 when the file is unreadable.

The split-half floor scores each plan's mean over the odd rounds against its mean over the even rounds.
With iterations that scatter independently around the plan's time with a relative spread sigma, the mean of
n of them scatters by sigma / sqrt(n), so two halves of N rounds differ by 2 sigma / sqrt(N) in spread and by
2 sqrt(2 / pi) sigma / sqrt(N) = 1.596 sigma / sqrt(N) on average (the mean absolute value of a normal
variable is sqrt(2 / pi) of its spread): the floor's MAPE falls as 1 / sqrt(N). Two plans keep their order in both halves with a probability set by their gap over that spread,
which gives the floor's expected Kendall tau. Both are estimates under that model; the sweep's report puts
them beside the measured floor.
"""
import json
import math
import sys

from fidelity_stats import mean, median

MAPE_TARGET_PCT = 1.5  # the project's goals for the split-half floor (docs/fidelity.md)
TAU_TARGET = 0.9
MAX_ROUNDS = 100_000  # beyond this a target counts as out of reach
MEAN_ABS_OF_NORMAL = math.sqrt(2 / math.pi)  # a normal variable's mean absolute value over its spread


def relative_spread(samples):
    """A plan's iteration-to-iteration spread as a fraction of its mean, from the differences between
    successive rounds: the machine's slow drift over a launch, which odd against even rounds cancels, does not
    count (the root mean square of the differences, over sqrt(2), is the samples' spread). Stalled iterations
    count, as they do in the mean. None for fewer than three samples or a non-positive mean."""
    if len(samples) < 3:
        return None
    m = mean(samples)
    if m <= 0:
        return None
    steps = [(b - a) ** 2 for a, b in zip(samples, samples[1:])]
    return math.sqrt(mean(steps) / 2.0) / m


def expected_mape_pct(spreads, rounds):
    """The split-half MAPE expected from N rounds: the mean over plans of 2 sqrt(2 / pi) sigma / sqrt(N), in
    percent."""
    return 100.0 * sum(2.0 * MEAN_ABS_OF_NORMAL * s / math.sqrt(rounds) for s in spreads) / len(spreads)


def pair_agreement(gap, spread_a, spread_b, rounds):
    """The expected contribution of one pair of plans to the split-half tau: each half orders the pair rightly
    with probability p (the gap over the spread of the difference of two half-means), so the halves agree
    with probability p^2 + (1 - p)^2 and the pair adds (2p - 1)^2 on average."""
    half = rounds / 2.0
    s = math.sqrt((spread_a ** 2 + spread_b ** 2) / half)
    if s <= 0:
        return 1.0 if gap > 0 else 0.0
    p = 0.5 * (1.0 + math.erf(gap / (s * math.sqrt(2.0))))
    return (2.0 * p - 1.0) ** 2


def expected_tau(times, spreads, rounds):
    """The split-half Kendall tau expected from N rounds, the plans' mean times standing for their true ones."""
    logs = [math.log(m) for m in times]
    pairs = [(i, j) for i in range(len(logs)) for j in range(i + 1, len(logs))]
    if not pairs:
        return None
    return sum(pair_agreement(abs(logs[i] - logs[j]), spreads[i], spreads[j], rounds) for i, j in pairs) / len(pairs)


def rounds_for(reaches):
    """The fewest rounds (at least 2) for which reaches(N) holds, reaches being monotone in N; None beyond
    MAX_ROUNDS."""
    hi = 2
    while not reaches(hi):
        if hi >= MAX_ROUNDS:
            return None
        hi = min(2 * hi, MAX_ROUNDS)
    lo = max(1, hi // 2)  # reaches(lo) is false unless hi is 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if reaches(mid):
            hi = mid
        else:
            lo = mid
    return hi


def closest_pair(names, times):
    """The two plans whose mean times lie closest (relative gap), the pair that needs the most rounds to
    order."""
    best = None
    for i in range(len(times)):
        for j in range(i + 1, len(times)):
            gap = abs(math.log(times[i] / times[j]))
            if best is None or gap < best[0]:
                best = (gap, names[i], names[j])
    return None if best is None else {"plans": [best[1], best[2]], "gap_pct": 100.0 * (math.exp(best[0]) - 1.0)}


def noise_outlook(names, samples, rounds):
    """For plans NAMES with their timed samples (round k at index k) and the launch's ROUNDS: each plan's
    spread, the floor expected at ROUNDS and the rounds that would bring it to the targets. None when a plan
    has too few or non-positive samples."""
    spreads = [relative_spread(s[:rounds]) for s in samples]
    times = [mean(s[:rounds]) for s in samples]
    if len(samples) < 2 or any(s is None for s in spreads) or any(m <= 0 for m in times):
        return None
    return {
        "spread_pct": {"median": 100.0 * median(spreads), "max": 100.0 * max(spreads)},
        "expected_at_rounds": {"rounds": rounds, "mape_pct": expected_mape_pct(spreads, rounds),
                               "kendall_tau": expected_tau(times, spreads, rounds)},
        "rounds_for_mape": {"target_pct": MAPE_TARGET_PCT,
                            "rounds": rounds_for(lambda n: expected_mape_pct(spreads, n) <= MAPE_TARGET_PCT)},
        "rounds_for_tau": {"target": TAU_TARGET,
                           "rounds": rounds_for(lambda n: expected_tau(times, spreads, n) >= TAU_TARGET)},
        "closest_pair": closest_pair(names, times),
    }


def launch_samples(path):
    """The plans' labels and timed samples (ms, round k at index k) of an interleave.json."""
    with open(path, encoding="utf-8") as f:
        launch = json.load(f)
    plans = launch["plans"]
    return [p["label"] for p in plans], [[v / 1e3 for v in p["iteration_time_us"]["samples"]] for p in plans]


def main(argv):
    as_json = "--json" in argv
    paths = [a for a in argv if a != "--json"]
    if len(paths) != 1:
        print("usage: fidelity_noise.py [--json] LAUNCH/interleave.json", file=sys.stderr)
        return 2
    try:
        names, samples = launch_samples(paths[0])
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"fidelity_noise.py: {paths[0]}: not an interleaved launch's summary ({type(e).__name__}: {e})",
              file=sys.stderr)
        return 2
    rounds = min((len(s) for s in samples), default=0)
    outlook = noise_outlook(names, samples, rounds) if rounds >= 3 else None
    if outlook is None:
        print(f"fidelity_noise.py: {paths[0]}: needs two plans or more with three timed rounds or more and "
              "positive times", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps(outlook, indent=1))
        return 0
    at, mape, tau = outlook["expected_at_rounds"], outlook["rounds_for_mape"], outlook["rounds_for_tau"]
    print(f"{len(names)} plans, {rounds} rounds; round-to-round spread {outlook['spread_pct']['median']:.1f} % "
          f"(median over plans), at most {outlook['spread_pct']['max']:.1f} %")
    print(f"expected split-half floor: MAPE {at['mape_pct']:.2f} %, tau {at['kendall_tau']:.2f}")
    for what, need in ((f"MAPE <= {mape['target_pct']} %", mape["rounds"]), (f"tau >= {tau['target']}", tau["rounds"])):
        print(f"{what}: " + (f"about {need} rounds" if need else f"beyond {MAX_ROUNDS} rounds"))
    pair = outlook["closest_pair"]
    print(f"closest plans: {pair['plans'][0]} and {pair['plans'][1]}, {pair['gap_pct']:.2f} % apart")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
