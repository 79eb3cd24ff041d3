#!/usr/bin/env python3
"""skew-eval.py: the constant arrival skew against the skew that grows with the compute between collectives,
re-scored on the measurements of an earlier fidelity sweep (no new executions).

For every configuration of SWEEP_DIR (a `scripts/fidelity-sweep` output: <config>/meas, rows.tsv, config.json,
calib/profile.yaml or the profile named in config.json), the skew is fitted on ONE plan's measured trace
(--fit-plan, default megatron-sync) two ways, from the profile the sweep predicted with:

  constant    sync_us = the median skew over the plan's collectives, sync_per_compute 0 (what
              `domino-profile --calibrate --fit sync` did before the growth term)
  mechanism   `domino-profile --calibrate TRACE --profile BASE --fit sync` (sync_us + sync_per_compute)

then every plan of the sweep is predicted again with `domino-sim` (the same named strategies and plan files)
into OUT_DIR/<variant>/<config>/pred, and scored with scripts/fidelity-table.py (the fit plan and the
compute-calibration plan are shown but not scored). OUT_DIR/summary.md holds the side-by-side figures.

Usage: scripts/skew-eval.py SWEEP_DIR OUT_DIR [--fit-plan PLAN] [--bin build/bin] [CONFIG ...]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
TABLE = os.path.join(ROOT, "scripts", "fidelity-table.py")


def file_name(plan):
    return plan.replace(":", "-")


def median_skew(trace_path):
    """The median over the trace's collectives of the last rank's start minus the first's."""
    with open(trace_path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    starts = {}
    for e in events:
        if e.get("cat") in ("allreduce", "allgather", "reducescatter"):
            starts.setdefault(e["args"]["op"], []).append(e["ts"])
    skews = [max(v) - min(v) for v in starts.values() if len(v) > 1]
    return statistics.median(skews)


def constant_profile(base, out, sync_us):
    """The base profile with sync_us replaced at every level and no growth term."""
    with open(base) as f:
        text = f.read()
    text = re.sub(r"^(\s*sync_us:\s*)\S+", lambda m: m.group(1) + repr(sync_us), text, flags=re.M)
    text = re.sub(r"^\s*sync_per_compute:.*\n", "", text, flags=re.M)
    with open(out, "w") as f:
        f.write(text)


def base_profile(sweep, config):
    calib = os.path.join(sweep, config, "calib", "profile.yaml")
    if os.path.exists(calib):
        return calib
    meta = json.load(open(os.path.join(sweep, config, "config.json")))
    return os.path.join(ROOT, "profiles", meta["profile"].split()[0])


def model_arg(model):
    path = os.path.join(ROOT, "configs", "models", model + ".yaml")
    return path if os.path.exists(path) else model


def predict(bin_dir, sweep, config, profile, out_dir):
    """domino-sim every plan of the sweep's rows.tsv with `profile`; writes rows.tsv and config.json."""
    src = os.path.join(sweep, config)
    meta = json.load(open(os.path.join(src, "config.json")))
    os.makedirs(os.path.join(out_dir, "pred"), exist_ok=True)
    rows = []
    for line in open(os.path.join(src, "rows.tsv")):
        plan, _pred, meas, _cmp, status = line.rstrip("\n").split("\t")
        pred = os.path.join(out_dir, "pred", file_name(plan) + ".json")
        plan_file = os.path.join(src, "plans", plan + ".yaml")
        which = ["--plan", plan_file] if os.path.exists(plan_file) else ["--strategy", plan]
        if status == "ok":
            run = subprocess.run([os.path.join(bin_dir, "domino-sim"), model_arg(meta["model"]), *which,
                                  "--profile", profile, "--json", pred], capture_output=True, text=True)
            if run.returncode != 0:
                status = "domino-sim failed"
                print(f"  {config} {plan}: domino-sim failed: {run.stderr.strip().splitlines()[-1:]}")
        rows.append("\t".join([plan, pred, meas, "", status]))
    with open(os.path.join(out_dir, "rows.tsv"), "w") as f:
        f.write("\n".join(rows) + "\n")
    return meta


def evaluate(args, config):
    trace = os.path.join(args.sweep, config, "meas", file_name(args.fit_plan) + ".trace.json")
    base = base_profile(args.sweep, config)
    fitted = {}
    for variant in ("constant", "mechanism"):
        out_dir = os.path.join(args.out, variant, config)
        os.makedirs(out_dir, exist_ok=True)
        profile = os.path.join(out_dir, "profile.yaml")
        if variant == "constant":
            skew = median_skew(trace)
            constant_profile(base, profile, skew)
            fitted[variant] = f"sync_us {skew:.0f}"
        else:
            run = subprocess.run([os.path.join(args.bin, "domino-profile"), "--calibrate", trace, "--profile", base,
                                  "--fit", "sync", "-o", profile], capture_output=True, text=True)
            if run.returncode != 0:
                sys.exit(f"skew-eval: {config}: domino-profile failed:\n{run.stdout}{run.stderr}")
            fitted[variant] = next((l for l in run.stdout.splitlines() if "arrival skew" in l), "").strip()
        meta = predict(args.bin, args.sweep, config, profile, out_dir)
        excluded = [p for p in (meta.get("calibrated_on"), args.fit_plan) if p]
        meta["calibrated_on"] = excluded
        meta["profile"] = f"{os.path.basename(base)} + arrival skew ({variant}) fitted on {args.fit_plan}"
        json.dump(meta, open(os.path.join(out_dir, "config.json"), "w"))
    return fitted


def summary_line(config, variant, fig, fitted):
    return (f"| {config} | {variant} | {fig.get('mape_pct', float('nan')):.1f} % | "
            f"{fig.get('kendall_tau', float('nan')):.2f} | {fig.get('pick_regret_pct', float('nan')):.1f} % "
            f"({fig.get('best_predicted_plan')}) | {fitted} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sweep")
    ap.add_argument("out")
    ap.add_argument("configs", nargs="*")
    ap.add_argument("--fit-plan", default="megatron-sync")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    args = ap.parse_args()
    if not os.path.isdir(args.sweep):
        print(f"skew-eval: no directory {args.sweep}", file=sys.stderr)
        return 2
    configs = args.configs or sorted(d for d in os.listdir(args.sweep)
                                     if os.path.exists(os.path.join(args.sweep, d, "rows.tsv")))
    fitted = {config: evaluate(args, config) for config in configs}
    lines = [f"Arrival skew fitted on {args.fit_plan}; MAPE, Kendall tau over the other plans; pick regret = measured "
             "time of the best-predicted plan / the best measured plan - 1 (no-comm excluded).", "",
             "| configuration | skew | MAPE | tau | pick regret (best predicted) | fitted |", "|---|---|---:|---:|---|---|"]
    for variant in ("constant", "mechanism"):
        vdir = os.path.join(args.out, variant)
        subprocess.run([sys.executable, TABLE, "table", vdir, *configs], check=True, capture_output=True)
        figs = json.load(open(os.path.join(vdir, "fidelity.json")))
        for config in configs:
            fig = figs[config]["figures"] if "figures" in figs.get(config, {}) else figs.get(config, {})
            lines.append(summary_line(config, variant, fig, fitted[config][variant]))
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
