#!/usr/bin/env python3
"""fidelity-table.py: the arithmetic of scripts/fidelity-sweep (plain python3, standard library only).

  fidelity-table.py table OUT_DIR CONFIG...
      reads OUT_DIR/CONFIG/rows.tsv (plan, predicted json, measured jsons, compare json) for each
      configuration and writes OUT_DIR/fidelity.md and OUT_DIR/fidelity.json: one table per configuration,
      and under it MAPE, Kendall tau-b and the tuner's regret (docs/fidelity.md says how each is defined),
      and, when each plan was measured in two or more rounds, the same MAPE and tau of each round's medians
      against the other rounds': how far the measurement agrees with itself, the floor for any prediction.
"""
import json
import math
import os
import sys


def median(values):
    v = sorted(values)
    n = len(v)
    if n == 0:
        return float("nan")
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def kendall_tau_b(xs, ys):
    """Kendall's tau-b (ties on either side count as neither concordant nor discordant)."""
    conc = disc = ties_x = ties_y = 0
    n = len(xs)
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = xs[i] - xs[j], ys[i] - ys[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif (dx > 0) == (dy > 0):
                conc += 1
            else:
                disc += 1
    denom = math.sqrt((conc + disc + ties_x) * (conc + disc + ties_y))
    return (conc - disc) / denom if denom > 0 else None


def load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_config(out_dir, config):
    rows = []
    with open(os.path.join(out_dir, config, "rows.tsv"), encoding="utf-8") as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            plan, pred_path, meas_paths, cmp_path, status = line.rstrip("\n").split("\t")
            row = {"plan": plan, "status": status}
            pred = load_json(pred_path)
            samples, rounds = [], []
            for mp in filter(None, meas_paths.split(",")):
                meas = load_json(mp)
                if meas:
                    samples += meas["iteration_time_us"]["samples"]
                    rounds.append([s / 1e3 for s in meas["iteration_time_us"]["samples"]])
            if status == "ok" and pred and samples:
                row["predicted_ms"] = pred["iteration_time_us"] / 1e3
                row["measured_ms"] = median(samples) / 1e3
                row["measured_min_ms"] = min(samples) / 1e3
                row["measured_samples_ms"] = [s / 1e3 for s in samples]
                row["measured_rounds_ms"] = rounds
                row["error_pct"] = 100.0 * (row["predicted_ms"] - row["measured_ms"]) / row["measured_ms"]
                row["predicted_exposed_comm_ms"] = pred["exposed_comm_us"] / 1e3
                cmp = load_json(cmp_path) if cmp_path else None
                if cmp:
                    row["op_error_median_pct"] = cmp.get("op_error_median_pct")
                    row["measured_exposed_comm_ms"] = cmp["exposed_comm_us"]["measured"] / 1e3
                    row["by_kind"] = {k: v["median_pct"] for k, v in cmp.get("by_kind", {}).items()}
            elif status == "ok":
                row["status"] = "missing output"
            rows.append(row)
    meta = load_json(os.path.join(out_dir, config, "config.json")) or {}
    return rows, meta


def repeatability(ok):
    """Each round's per-plan medians scored against the median of the other rounds' samples, as if that
    round were a prediction: the MAPE and tau a perfect model would get from the measurement's noise alone."""
    n_rounds = min(len(r["measured_rounds_ms"]) for r in ok)
    if n_rounds < 2 or len(ok) < 2:
        return None
    mape, tau = [], []
    for k in range(n_rounds):
        this = [median(r["measured_rounds_ms"][k]) for r in ok]
        rest = [median([s for j, rnd in enumerate(r["measured_rounds_ms"]) if j != k for s in rnd]) for r in ok]
        mape.append(100.0 * sum(abs(a - b) / b for a, b in zip(this, rest)) / len(ok))
        tau.append(kendall_tau_b(this, rest))
    return {"rounds": n_rounds, "mape_pct": mape, "kendall_tau": tau}


def figures(rows, calibrated_on=None):
    # The plan whose run the profile was calibrated on is shown but not scored.
    ok = [r for r in rows if "error_pct" in r and r["plan"] != calibrated_on]
    out = {"plans": len(rows), "plans_measured": len(ok)}
    if calibrated_on:
        out["not_scored"] = calibrated_on
    if not ok:
        return out
    rep = repeatability(ok)
    if rep:
        out["repeatability"] = rep
    out["mape_pct"] = sum(abs(r["error_pct"]) for r in ok) / len(ok)
    out["kendall_tau"] = kendall_tau_b([r["predicted_ms"] for r in ok], [r["measured_ms"] for r in ok])
    # Regret against the best plan that really trains: no-comm skips the AllReduces, it is only a bound.
    real = [r for r in ok if r["plan"] != "no-comm"]
    tuned = [r for r in real if r["plan"] == "tuned"]
    if tuned and real:
        best = min(real, key=lambda r: r["measured_ms"])
        out["regret_pct"] = 100.0 * (tuned[0]["measured_ms"] / best["measured_ms"] - 1.0)
        out["best_measured_plan"] = best["plan"]
    out["best_predicted_plan"] = min(real, key=lambda r: r["predicted_ms"])["plan"] if real else None
    return out


def fmt(v, spec):
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def markdown(config, rows, meta, fig):
    lines = [f"### {config}", ""]
    desc = ", ".join(f"{k} {v}" for k, v in meta.items() if k in ("model", "profile", "link", "iters", "warmup",
                                                                   "rounds", "overrides", "boost", "load_average",
                                                                   "calibrated_on"))
    if desc:
        lines += [desc, ""]
    lines += ["| plan | predicted ms | measured ms (median) | error % | measured min ms | "
              "exposed comm ms pred / meas | op err median % |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "error_pct" not in r:
            lines.append(f"| {r['plan']} | | | {r['status']} | | | |")
            continue
        plan = r["plan"] + (" (calibration plan, not scored)" if r["plan"] == fig.get("not_scored") else "")
        lines.append(f"| {plan} | {r['predicted_ms']:.1f} | {r['measured_ms']:.1f} | {r['error_pct']:+.1f} | {r['measured_min_ms']:.1f} | "
                     f"{r['predicted_exposed_comm_ms']:.1f} / {fmt(r.get('measured_exposed_comm_ms'), '.1f')} | "
                     f"{fmt(r.get('op_error_median_pct'), '.1f')} |")
    lines += ["",
              f"MAPE {fmt(fig.get('mape_pct'), '.1f')} % (target <= 5), "
              f"Kendall tau {fmt(fig.get('kendall_tau'), '.2f')} (target >= 0.8), "
              f"tuner regret {fmt(fig.get('regret_pct'), '.1f')} % (target <= 5; best measured: "
              f"{fig.get('best_measured_plan', 'n/a')}, best predicted: {fig.get('best_predicted_plan', 'n/a')}); "
              f"{fig['plans_measured']} of {fig['plans']} plans measured and scored", ""]
    rep = fig.get("repeatability")
    if rep:
        taus = [t for t in rep["kendall_tau"] if t is not None]
        lines += [f"Repeatability of the measurement (each of {rep['rounds']} rounds against the others' median): "
                  f"MAPE {min(rep['mape_pct']):.1f}-{max(rep['mape_pct']):.1f} %, "
                  f"Kendall tau {fmt(min(taus) if taus else None, '.2f')}-{fmt(max(taus) if taus else None, '.2f')}", ""]
    return lines


def write_table(out_dir, configs):
    doc = {"configurations": {}}
    md = ["# Fidelity sweep", "",
          "error % = (predicted - measured) / measured; MAPE = mean |error %|; Kendall tau-b between predicted "
          "and measured iteration times; regret = measured time of the tuner's pick / best measured (no-comm "
          "excluded) - 1.", ""]
    for config in configs:
        rows, meta = read_config(out_dir, config)
        fig = figures(rows, meta.get("calibrated_on"))
        doc["configurations"][config] = {"meta": meta, "rows": rows, "figures": fig}
        md += markdown(config, rows, meta, fig)
    for name, text in (("fidelity.json", json.dumps(doc, indent=2, allow_nan=False) + "\n"),
                       ("fidelity.md", "\n".join(md))):
        tmp = os.path.join(out_dir, name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, os.path.join(out_dir, name))
    print("\n".join(md))


def main(argv):
    if len(argv) >= 4 and argv[1] == "table":
        write_table(argv[2], argv[3:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
