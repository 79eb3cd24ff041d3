#!/usr/bin/env python3
"""launch-repeatability.py: how far two interleaved launches of the same plans agree with each other.

The sweep's split-half floor compares rounds of ONE launch; a model is fitted on one launch's calibration
runs and judged on plans whose relative speed may itself move from one launch to the next (memory layout,
which thread wins a core). This compares, per configuration present in every SWEEP_DIR (outputs of
`scripts/fidelity-sweep`), each plan's measured speedup over the baseline (the median over rounds of the
same round's ratio, as the sweep reports it) between launches: the mean absolute difference in points and the
largest, over the plans other than the baseline (whose speedup is 1 by definition), and Kendall's tau between
the launches' speedups, the baseline ranked among them. The tuner's pick is left out (it may be another
plan in each launch), and so is every plan not measured in all of them.

Usage: scripts/launch-repeatability.py SWEEP_DIR SWEEP_DIR [SWEEP_DIR ...]
Exit code 0, or 2 on bad usage, an unreadable fidelity.json, or directories that share no configuration.
"""
import glob
import json
import os
import sys
from itertools import combinations

from fidelity_stats import kendall_tau_b


class BadInput(Exception):
    pass


def measured_speedups(sweep_dir):
    """{configuration: (baseline, {plan: measured speedup})} from every fidelity.json under sweep_dir."""
    out = {}
    for path in glob.glob(os.path.join(sweep_dir, "**", "fidelity.json"), recursive=True):
        try:
            with open(path) as f:
                configurations = json.load(f)["configurations"]
            for name, c in configurations.items():
                speedup = c.get("figures", {}).get("speedup") or {}
                plans = {p["plan"]: float(p["measured"]) for p in speedup.get("plans", []) if p.get("measured")}
                if plans:
                    out[name] = (speedup.get("baseline", "baseline"), plans)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise BadInput(f"{path}: not a fidelity sweep's figures ({type(e).__name__}: {e})")
    return out


def compare(a, b):
    """a, b: (baseline, {plan: speedup}) of one configuration in two launches."""
    (base_a, a), (base_b, b) = a, b
    if base_a != base_b:
        raise BadInput(f"the launches' speedups are over different baselines: {base_a}, {base_b}")
    plans = sorted(p for p in a.keys() & b.keys() if p not in ("tuned", base_a))
    if not plans:
        raise BadInput("the launches share no plan besides the baseline and the tuner's pick")
    diffs = [100 * (b[p] - a[p]) for p in plans]
    largest = max(plans, key=lambda p: abs(b[p] - a[p]))
    return {
        "plans": len(plans),
        "mean_abs_points": sum(abs(d) for d in diffs) / len(diffs),
        "largest": f"{largest} {100 * (b[largest] - a[largest]):+.1f}",
        "tau": kendall_tau_b([a[p] for p in plans] + [1.0], [b[p] for p in plans] + [1.0]),
    }


def main(argv):
    if len(argv) < 3 or any(arg.startswith("-") for arg in argv[1:]):
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    try:
        launches = [(d, measured_speedups(d)) for d in argv[1:]]
        shared = set.intersection(*(set(s) for _, s in launches))
        if not shared:
            raise BadInput("the sweeps share no configuration with measured speedups")
        rows = [(config, da, db, compare(sa[config], sb[config]))
                for config in sorted(shared) for (da, sa), (db, sb) in combinations(launches, 2)]
    except BadInput as e:
        print(f"launch-repeatability: {e}", file=sys.stderr)
        return 2
    print("| configuration | launches | plans | speedup difference, mean abs (points) | largest | Kendall tau |")
    print("|---|---|---|---|---|---|")
    for config, da, db, r in rows:
        print(f"| {config} | {da} / {db} | {r['plans']} | {r['mean_abs_points']:.1f} | {r['largest']} | "
              f"{r['tau']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
