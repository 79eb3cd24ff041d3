"""fidelity_comm_cost.py: each plan's measured time split, round by round inside one interleaved launch, into
what its slicing costs the compute and what its communication costs, each against the prediction
(scripts/fidelity-sweep --comm-cost; plain python3, standard library only).

A plan P runs beside its comm-off run (P+no-comm: the same ops and order with every collective removed) and
no-comm (megatron-sync's comm-off run). In every round:
  slicing cost        P+no-comm / no-comm - 1   the compute of P's slices (smaller GEMMs, more ops) against
                                                the unsliced compute
  communication cost  P / P+no-comm - 1         what P's collectives add: the communication its compute does
                                                not hide, and the compute they slow
The product of the two is P's time over no-comm's. The measured figure is the median over rounds of the same
round's ratio, so that drift common to a round divides out; the predicted one is the same ratio of the
predicted iteration times; the error is in points (predicted - measured).
"""
import random

from fidelity_stats import kendall_tau_b, median, percentile

COMM_OFF_SUFFIX = "+no-comm"
RESAMPLES = 1000
SEED = 1  # fixed: the same measurements always give the same intervals


def comm_off_name(plan):
    """The plan whose run is `plan` with its communication switched off."""
    return "no-comm" if plan == "megatron-sync" else plan + COMM_OFF_SUFFIX


def is_comm_off_run(plan):
    return plan.endswith(COMM_OFF_SUFFIX)


def per_round_pct(num, den):
    rounds = min(len(num["measured_samples_ms"]), len(den["measured_samples_ms"]))
    return [100.0 * (num["measured_samples_ms"][k] / den["measured_samples_ms"][k] - 1) for k in range(rounds)]


def part(num, den):
    """num's time over den's, as a cost in %, measured round by round and predicted."""
    per_round = per_round_pct(num, den)
    predicted = 100.0 * (num["predicted_ms"] / den["predicted_ms"] - 1)
    measured = median(per_round)
    return {"predicted_pct": predicted, "measured_pct": measured, "measured_p10_pct": percentile(per_round, 10),
            "measured_p90_pct": percentile(per_round, 90), "error_points": predicted - measured}


def comm_cost(rows, scored):
    """Per scored plan with a measured comm-off run (and no-comm measured): its slicing and communication
    costs; None without them."""
    measured = {r["plan"]: r for r in rows if "error_pct" in r and r.get("measured_samples_ms")}
    free = measured.get("no-comm")
    if free is None:
        return None
    plans = []
    for r in scored:
        off = measured.get(comm_off_name(r["plan"]))
        if r["plan"] == "no-comm" or is_comm_off_run(r["plan"]) or off is None:
            continue
        plans.append({"plan": r["plan"], "comm_off_run": off["plan"], "slicing": part(off, free),
                      "communication": part(r, off)})
    if not plans:
        return None
    out = {"plans": plans}
    for key in ("slicing", "communication"):
        errors = [p[key]["error_points"] for p in plans]
        out[key] = {"mean_abs_error_points": sum(abs(e) for e in errors) / len(errors),
                    "mean_error_points": sum(errors) / len(errors),
                    "interval_95": error_intervals(rows, plans, key),
                    "kendall_tau": kendall_tau_b([p[key]["predicted_pct"] for p in plans],
                                                 [p[key]["measured_pct"] for p in plans]) if len(plans) >= 2 else None}
    return out


def error_intervals(rows, plans, key):
    """Bootstrap 95 % intervals of the mean |error| and the mean signed error of one part: the rounds are
    resampled with replacement (the same rounds for every plan: each ratio is taken inside a round) and every
    plan's median ratio recomputed, the predictions held fixed."""
    measured = {r["plan"]: r for r in rows if r.get("measured_samples_ms")}
    pairs = [(measured[p["plan"]], measured[p["comm_off_run"]]) if key == "communication"
             else (measured[p["comm_off_run"]], measured["no-comm"]) for p in plans]
    series = [per_round_pct(num, den) for num, den in pairs]
    rounds = min(len(s) for s in series)
    if rounds < 2:
        return None
    rng = random.Random(SEED)
    absolute, signed = [], []
    for _ in range(RESAMPLES):
        pick = [rng.randrange(rounds) for _ in range(rounds)]
        errors = [p[key]["predicted_pct"] - median([s[k] for k in pick]) for p, s in zip(plans, series)]
        absolute.append(sum(abs(e) for e in errors) / len(errors))
        signed.append(sum(errors) / len(errors))
    return {"mean_abs_error_points": [percentile(absolute, 2.5), percentile(absolute, 97.5)],
            "mean_error_points": [percentile(signed, 2.5), percentile(signed, 97.5)]}


def comm_cost_lines(cost):
    """The markdown of comm_cost()'s figures."""
    if not cost:
        return []

    def summary(key):
        fig, t = cost[key], cost[key]["kendall_tau"]
        ci = fig.get("interval_95")
        bounds = (lambda name: f" [{ci[name][0]:.1f}, {ci[name][1]:.1f}]") if ci else (lambda name: "")
        return (f"mean |error| {fig['mean_abs_error_points']:.1f}{bounds('mean_abs_error_points')} points, mean "
                f"error {fig['mean_error_points']:+.1f}{bounds('mean_error_points')} points, Kendall tau "
                + ("n/a" if t is None else f"{t:.2f}"))

    def cell(p):
        return (f"{p['predicted_pct']:+.1f} | {p['measured_pct']:+.1f} ({p['measured_p10_pct']:+.1f} to "
                f"{p['measured_p90_pct']:+.1f}) | {p['error_points']:+.1f}")

    lines = ["Each plan's time split inside the launch, round by round, into its slicing's compute cost (its comm-off "
             "run over no-comm) and its communication cost (the plan over its comm-off run), in %, with 95 % "
             "intervals (bootstrap over the rounds): slicing " + summary("slicing") + "; communication "
             + summary("communication"), "",
             "| plan | slicing predicted % | measured % (p10 to p90 over rounds) | error points | communication "
             "predicted % | measured % (p10 to p90) | error points |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {p['plan']} | {cell(p['slicing'])} | {cell(p['communication'])} |" for p in cost["plans"]]
    return lines + [""]
