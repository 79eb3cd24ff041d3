#!/usr/bin/env python3
"""gemm-shape-check.py: how well profiles have the relative speed of a model's GEMM shapes, judged by training.

A calibration rescales a profile's GEMM times to a measured training step (per FLOP band), so what a profile
must get right on its own is how the shapes compare: whether the small GEMMs of a sliced plan are as much
faster than the large ones as they are in training. For every GEMM of the measured traces (rank 0 and 1, each
op's median over the timed iterations) whose (m, n, k, transposes) the profile's table holds, the ratio
measured / profile is taken; the profile's level is the median ratio, and per profile this prints:

  level        median measured / profile (what a calibration takes out)
  deviation    median and largest |ratio / level - 1| over the shapes
  rows R       median ratio of the GEMMs of R rows (k for a weight gradient), over the level

  scripts/gemm-shape-check.py TRACE[,TRACE...] PROFILE.yaml [PROFILE.yaml ...]

e.g. the traces of `domino-exec cpu-gpt --plans slices:4x1:batch no-comm --out L` against `--quick` profiles.
"""
import json
import math
import statistics
import sys
from collections import defaultdict

import yaml


def profile_table(path):
    """(m, n, k, transpose_a, transpose_b) -> time_us of the profile's fp32 GEMM rows."""
    doc = yaml.safe_load(open(path))
    table = {}
    for row in ((doc.get("gemm") or {}).get("fp32") or {}).get("table") or []:
        if len(row) == 6:
            table[tuple(row[:5])] = row[5]
        elif len(row) == 4:
            for ta in (0, 1):
                for tb in (0, 1):
                    table.setdefault((row[0], row[1], row[2], ta, tb), row[3])
    return table


def measured_gemms(paths):
    """(m, n, k, transpose_a, transpose_b) -> per-op medians of the traces' GEMMs."""
    out = defaultdict(list)
    for path in paths:
        for e in json.load(open(path))["traceEvents"]:
            args = e.get("args", {})
            code = args.get("code", "")
            if e.get("ph") != "X" or e.get("pid") not in (0, 1) or not code.startswith("MatMul"):
                continue
            key = (args["m"], args["n"], args["k"], int(code == "MatMulWgrad"), int(code == "MatMulDgrad"))
            out[key].append(args.get("dur_median", e["dur"]))
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    measured = measured_gemms(sys.argv[1].split(","))
    for path in sys.argv[2:]:
        table = profile_table(path)
        logs = {key: math.log(statistics.median(v) / table[key]) for key, v in measured.items() if key in table}
        if not logs:
            print(f"{path}: no GEMM of the traces in its table")
            continue
        level = statistics.median(logs.values())
        dev = sorted(abs(v - level) for v in logs.values())
        by_rows = defaultdict(list)
        for key, v in logs.items():
            by_rows[key[2] if key[3] else key[0]].append(v - level)
        rows = " ".join(f"rows {r}: {math.exp(statistics.median(v)):.2f}" for r, v in sorted(by_rows.items()))
        print(f"{path}: {len(logs)} shapes, level {math.exp(level):.2f}, deviation median "
              f"{100 * (math.exp(dev[len(dev) // 2]) - 1):.1f} % max {100 * (math.exp(dev[-1]) - 1):.0f} %; {rows}")


if __name__ == "__main__":
    main()
