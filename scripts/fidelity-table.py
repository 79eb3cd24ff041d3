#!/usr/bin/env python3
"""fidelity-table.py: the arithmetic of scripts/fidelity-sweep (plain python3, standard library only).

  fidelity-table.py table OUT_DIR CONFIG...
      reads OUT_DIR/CONFIG/rows.tsv (plan, predicted json, measured jsons, compare json) for each
      configuration and writes OUT_DIR/fidelity.md and OUT_DIR/fidelity.json: one table per configuration,
      and under it MAPE, Kendall tau-b and the tuner's regret (docs/fidelity.md says how each is defined)
      with bootstrap 95 % intervals over the iterations; for an interleaved launch (config.json
      "interleaved": sample k of every plan is from round k) the split-half noise floor (odd rounds against
      even rounds) with the rounds its targets would take (fidelity_noise.py) and each plan's measured
      speedup over megatron-async (or the first plan), round by round, against the predicted one, and, where the launch ran comm-off runs (NAME+no-comm, not scored), each
      plan's slicing and communication costs (fidelity_comm_cost.py); and, when each plan was measured in two
      or more separate files (earlier sweeps), each file's means against the others'. A plan's measured time is
      its mean over the timed iterations (training's throughput is tokens per mean iteration). Where the tuner's
      pick has a measured plan's very schedule, the iteration-time figures count that schedule once
      (fidelity_twin.py).
"""
import json
import math
import os
import random
import sys

from fidelity_comm_cost import comm_cost, comm_cost_lines, is_comm_off_run
from fidelity_noise import noise_outlook
from fidelity_stats import kendall_tau_b, mean, median, percentile, waits_by_phase
from fidelity_twin import TUNED, load_json, one_row_per_schedule, twin_gap

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 1  # fixed: the same measurements always give the same intervals


def read_config(out_dir, config):
    rows = []
    with open(os.path.join(out_dir, config, "rows.tsv"), encoding="utf-8") as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            plan, pred_path, meas_paths, cmp_path, status = line.rstrip("\n").split("\t")
            row = {"plan": plan, "status": status}
            if pred_path.endswith(".json"):
                row["pred_trace"] = pred_path[:-len(".json")] + ".trace.json"
            pred = load_json(pred_path)
            measured = [m for m in map(load_json, filter(None, meas_paths.split(","))) if m]
            rounds = [[s / 1e3 for s in m["iteration_time_us"]["samples"]] for m in measured]
            samples = [s for m in measured for s in m["iteration_time_us"]["samples"]]
            # Per-iteration compute times align with the samples of one launch only.
            busy = measured[0].get("compute_busy_us") if len(measured) == 1 else None
            if status == "ok" and pred and samples:
                row["predicted_ms"] = pred["iteration_time_us"] / 1e3
                row["measured_ms"] = mean(samples) / 1e3
                row["measured_median_ms"] = median(samples) / 1e3
                row["measured_min_ms"] = min(samples) / 1e3
                row["measured_samples_ms"] = [s / 1e3 for s in samples]
                row["measured_rounds_ms"] = rounds
                if busy and all(len(b) == len(samples) for b in busy):
                    row["compute_busy_ms"] = [[v / 1e3 for v in b] for b in busy]
                row["error_pct"] = 100.0 * (row["predicted_ms"] - row["measured_ms"]) / row["measured_ms"]
                cmp = load_json(cmp_path) if cmp_path else None
                if cmp:
                    row["op_error_median_pct"] = cmp.get("op_error_median_pct")
                    # Both sides from domino-compare, one accounting over the two traces: the simulator's own
                    # exposed_comm_us on a CPU profile counts the time a compute op loses beside a collective as
                    # hidden, where the traces (predicted and measured alike) show it as a gap.
                    exposed = cmp["exposed_comm_us"]
                    if exposed.get("predicted") is not None:
                        row["predicted_exposed_comm_ms"] = exposed["predicted"] / 1e3
                    row["measured_exposed_comm_ms"] = exposed["measured"] / 1e3
                    row["by_kind"] = {k: v["median_pct"] for k, v in cmp.get("by_kind", {}).items()}
                    row["by_kind_spread"] = {k: v["spread_pct"] for k, v in cmp.get("by_kind", {}).items()
                                             if v.get("spread_pct") is not None}
                    row["waits_by_phase"] = cmp.get("arrival_wait_by_phase")
            elif status == "ok":
                row["status"] = "missing output"
            rows.append(row)
    meta = load_json(os.path.join(out_dir, config, "config.json")) or {}
    return rows, meta


def repeatability(ok):
    """Each round's per-plan means scored against the mean of the other rounds' samples, as if that
    round were a prediction: the MAPE and tau a perfect model would get from the measurement's noise alone."""
    n_rounds = min(len(r["measured_rounds_ms"]) for r in ok)
    if n_rounds < 2 or len(ok) < 2:
        return None
    mape, tau = [], []
    for k in range(n_rounds):
        this = [mean(r["measured_rounds_ms"][k]) for r in ok]
        rest = [mean([s for j, rnd in enumerate(r["measured_rounds_ms"]) if j != k for s in rnd]) for r in ok]
        mape.append(100.0 * sum(abs(a - b) / b for a, b in zip(this, rest)) / len(ok))
        tau.append(kendall_tau_b(this, rest))
    return {"rounds": n_rounds, "mape_pct": mape, "kendall_tau": tau}


def scores(ok, measured_ms, pick=TUNED):
    """MAPE, tau and the tuner's regret of the predictions against one set of measured times (one per row);
    pick: the row that stands for the tuner's pick (its schedule twin's, when the two are one row)."""
    pred = [r["predicted_ms"] for r in ok]
    out = {"mape_pct": 100.0 * sum(abs(p - m) / m for p, m in zip(pred, measured_ms)) / len(ok),
           "kendall_tau": kendall_tau_b(pred, measured_ms)}
    # Regret against the best plan that really trains: no-comm skips the AllReduces, it is only a bound.
    real = [(r, m) for r, m in zip(ok, measured_ms) if r["plan"] != "no-comm"]
    tuned = [m for r, m in real if r["plan"] == pick]
    if tuned and real:
        best_row, best_ms = min(real, key=lambda rm: rm[1])
        out["regret_pct"] = 100.0 * (tuned[0] / best_ms - 1.0)
        out["best_measured_plan"] = best_row["plan"]
    return out


def bootstrap(ok, pick=TUNED, resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED):
    """95 % intervals of MAPE, tau and regret: each plan's iterations resampled with replacement (its mean
    recomputed), the predictions held fixed; the 2.5th and 97.5th percentiles over the resamples."""
    rng = random.Random(seed)
    drawn = {"mape_pct": [], "kendall_tau": [], "regret_pct": []}
    for _ in range(resamples):
        meas = [mean([rng.choice(r["measured_samples_ms"]) for _ in r["measured_samples_ms"]]) for r in ok]
        for key, value in scores(ok, meas, pick).items():
            if key in drawn and value is not None:
                drawn[key].append(value)
    return {key: [percentile(v, 2.5), percentile(v, 97.5)] for key, v in drawn.items() if v}


def split_half(ok):
    """The measurement against itself: each plan's mean over the odd interleaved rounds (1st, 3rd, ...)
    scored like a prediction against its mean over the even rounds: the MAPE and tau a perfect model would
    get from the noise of half the rounds."""
    rounds = min(len(r["measured_samples_ms"]) for r in ok)
    if rounds < 2 or len(ok) < 2:
        return None
    out = {"rounds": rounds, **odd_against_even([r["measured_samples_ms"][:rounds] for r in ok])}
    outlook = noise_outlook([r["plan"] for r in ok], [r["measured_samples_ms"] for r in ok], rounds)
    if outlook:
        out["outlook"] = outlook
    steady = drift_divided_out([r["measured_samples_ms"][:rounds] for r in ok])
    if steady:
        out["drift_divided_out"] = odd_against_even(steady)
    if all("compute_busy_ms" in r for r in ok):
        out["compute_speed_taken_out"] = odd_against_even(
            [compute_speed_taken_out(r["measured_samples_ms"][:rounds], [b[:rounds] for b in r["compute_busy_ms"]])
             for r in ok])
    return out


def odd_against_even(samples):
    odd = [mean(s[0::2]) for s in samples]
    even = [mean(s[1::2]) for s in samples]
    return {"mape_pct": 100.0 * sum(abs(a - b) / b for a, b in zip(odd, even)) / len(samples),
            "kendall_tau": kendall_tau_b(odd, even)}


def drift_divided_out(samples):
    """Every plan's samples with the drift common to a round divided out: round k's samples over that round's
    geometric mean across plans, rescaled by the mean factor so they stay in ms. A machine slower in one
    round for every plan alike changes nothing; what remains is what differs between plans of one round.
    None with fewer than two plans or a non-positive sample."""
    if len(samples) < 2 or any(v <= 0 for s in samples for v in s):
        return None
    rounds = len(samples[0])
    log_factor = [sum(math.log(s[k]) for s in samples) / len(samples) for k in range(rounds)]
    mean_log = sum(log_factor) / rounds
    return [[s[k] / math.exp(log_factor[k] - mean_log) for k in range(rounds)] for s in samples]


def compute_speed_taken_out(samples, busy_by_rank):
    """One plan's samples with its ranks' compute speed taken out: each iteration minus the larger, over the
    ranks, of that rank's compute-stream time above its median over the plan's iterations. A vCPU that ran
    slower in one iteration (this machine's vCPUs switch between speeds for seconds at a time) delays the
    iteration by about its extra compute time; the plan's typical compute time, interference included, stays."""
    medians = [median(b) for b in busy_by_rank]
    return [t - max(b[k] - m for b, m in zip(busy_by_rank, medians)) for k, t in enumerate(samples)]


def speedups(ok):
    """Each plan's speedup over the baseline (megatron-async when measured, else the first plan) measured
    round by round inside the launch (baseline time / plan time of the same round: the drift divides out),
    against the predicted one; error in points = 100 x (predicted - measured speedup)."""
    if len(ok) < 2:
        return None
    base = next((r for r in ok if r["plan"] == "megatron-async"), ok[0])
    rounds = min(len(r["measured_samples_ms"]) for r in ok)
    plans = []
    for r in ok:
        if r is base:
            continue
        per_round = [base["measured_samples_ms"][k] / r["measured_samples_ms"][k] for k in range(rounds)]
        measured = median(per_round)
        predicted = base["predicted_ms"] / r["predicted_ms"]
        plans.append({"plan": r["plan"], "predicted": predicted, "measured": measured,
                      "measured_p10": percentile(per_round, 10), "measured_p90": percentile(per_round, 90),
                      "error_points": 100.0 * (predicted - measured)})
    return {"baseline": base["plan"], "rounds": rounds, "plans": plans,
            "mean_abs_error_points": sum(abs(p["error_points"]) for p in plans) / len(plans),
            "kendall_tau": kendall_tau_b([p["predicted"] for p in plans], [p["measured"] for p in plans])
            if len(plans) >= 2 else None}


def bound(ok):
    """How close the tuner's pick comes to the no-comm bound, measured round by round inside the launch
    (no-comm time / tuned time of the same round), and how much of megatron-async's time is communication
    (1 - no-comm / megatron-async): the link rate that makes it about 0.3 stands for TP 8 on a DGX-H100."""
    by_plan = {r["plan"]: r["measured_samples_ms"] for r in ok}
    if "no-comm" not in by_plan:
        return None
    free = by_plan["no-comm"]
    out = {}
    for key, plan in (("tuned_fraction", "tuned"), ("megatron_async_fraction", "megatron-async")):
        if plan in by_plan:
            rounds = min(len(free), len(by_plan[plan]))
            per_round = [free[k] / by_plan[plan][k] for k in range(rounds)]
            out[key] = {"median": median(per_round), "p10": percentile(per_round, 10),
                        "p90": percentile(per_round, 90)}
    if "megatron_async_fraction" in out:
        out["comm_share_of_megatron_async"] = 1.0 - out["megatron_async_fraction"]["median"]
    return out or None


def rank_speeds(rows):
    """How much longer the slowest rank computes than the fastest, per iteration's median (each rank's summed
    compute-stream op time): the simulator runs every rank at one speed, so a host whose cores differ in speed
    puts the difference into the ranks' waits at each collective (the arrival skew), not into the compute."""
    per_plan = {}
    for r in rows:
        busy = r.get("compute_busy_ms")
        medians = [median(b) for b in busy] if busy and len(busy) > 1 and all(busy) else []
        if medians and min(medians) > 0:
            per_plan[r["plan"]] = {"rank_medians_ms": medians,
                                   "slowest_over_fastest": max(medians) / min(medians),
                                   "slowest_rank": medians.index(max(medians))}
    if not per_plan:
        return None
    ratios = [v["slowest_over_fastest"] for v in per_plan.values()]
    slowest = [v["slowest_rank"] for v in per_plan.values()]
    mostly = max(set(slowest), key=slowest.count)
    return {"plans": per_plan, "min": min(ratios), "max": max(ratios),
            "no_comm": per_plan.get("no-comm", {}).get("slowest_over_fastest"),
            "slowest_rank_mostly": mostly, "slowest_rank_share": slowest.count(mostly) / len(slowest)}


def median_interval(values, resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED):
    """95 % interval of the median of `values`: the values resampled with replacement, the 2.5th and 97.5th
    percentiles of the resamples' medians."""
    rng = random.Random(seed)
    medians = [median([rng.choice(values) for _ in values]) for _ in range(resamples)]
    return [percentile(medians, 2.5), percentile(medians, 97.5)]


def op_error_by_kind(rows):
    # Per op kind over the scored plans: the median of each plan's median per-op duration error (domino-compare,
    # each measured op its median over the iterations) with its interval over the plans (how far the figure
    # would move on another draw of plans like these), and the median of the measured spread of that kind's ops.
    errors, spreads = {}, {}
    for r in rows:
        for kind, pct in (r.get("by_kind") or {}).items():
            errors.setdefault(kind, []).append(pct)
        for kind, pct in (r.get("by_kind_spread") or {}).items():
            spreads.setdefault(kind, []).append(pct)
    return {k: {"median_pct": median(v), "plans": len(v), "interval_95": median_interval(v),
                "spread_pct": median(spreads[k]) if spreads.get(k) else None} for k, v in sorted(errors.items())}


def exposed_comm_error(rows):
    """Over the scored plans that communicate and have both sides: the mean predicted and measured exposed
    communication and the mean |difference| (ms), or None."""
    both = [r for r in rows if r.get("predicted_exposed_comm_ms") is not None
            and r.get("measured_exposed_comm_ms") is not None and r["plan"] != "no-comm"]
    if not both:
        return None
    return {"plans": len(both),
            "predicted_mean_ms": mean([r["predicted_exposed_comm_ms"] for r in both]),
            "measured_mean_ms": mean([r["measured_exposed_comm_ms"] for r in both]),
            "mean_abs_error_ms": mean([abs(r["predicted_exposed_comm_ms"] - r["measured_exposed_comm_ms"])
                                       for r in both])}


def figures(rows, calibrated_on=None, interleaved=False):
    # The plan(s) whose run the profile was calibrated on are shown but not scored (one name or a list).
    excluded = calibrated_on if isinstance(calibrated_on, list) else [calibrated_on] if calibrated_on else []
    # Comm-off runs (--comm-cost) are measured to split the plans' times, not scored as plans.
    ok = [r for r in rows if "error_pct" in r and r["plan"] not in excluded and not is_comm_off_run(r["plan"])]
    out = {"plans": len(rows), "plans_measured": len(ok)}
    if calibrated_on:
        out["not_scored"] = calibrated_on
    if not ok:
        return out
    twin = twin_gap(rows, ok)
    if twin:
        out["tuned_twin"] = twin
    # One schedule run twice counts once in the iteration-time figures; the per-op and per-trace ones (op
    # errors, waits, exposed communication, comm cost) keep both runs, each a measurement of its ops.
    distinct, pick = one_row_per_schedule(ok, twin["plan"] if twin and twin["scored"] else None)
    rep = repeatability(distinct)
    if rep:
        out["repeatability"] = rep
    out.update(scores(distinct, [r["measured_ms"] for r in distinct], pick))
    out["interval_95"] = bootstrap(distinct, pick)
    if interleaved:
        half = split_half(distinct)
        if half:
            out["split_half"] = half
        ratio = speedups(distinct)
        if ratio:
            out["speedup"] = ratio
        # The bound is measured even where its run calibrated the profile (and is not scored).
        near = bound([r for r in rows if r.get("measured_samples_ms")])
        if near:
            out["bound"] = near
        speeds = rank_speeds(rows)
        if speeds:
            out["rank_speed"] = speeds
        cost = comm_cost(rows, ok)
        if cost:
            out["comm_cost"] = cost
    kinds = op_error_by_kind(ok)
    if kinds:
        out["op_error_by_kind"] = kinds
    waits = waits_by_phase(ok)
    if waits:
        out["arrival_wait_by_phase"] = waits
    exposed = exposed_comm_error(ok)
    if exposed:
        out["exposed_comm"] = exposed
    real = [r for r in distinct if r["plan"] != "no-comm"]
    out["best_predicted_plan"] = min(real, key=lambda r: r["predicted_ms"])["plan"] if real else None
    if real:
        # The profile's own pick among the measured plans: its measured time against the best measured, which
        # compares profiles on one launch without executing a new tuner pick.
        best = min(real, key=lambda r: r["predicted_ms"])
        out["pick_regret_pct"] = 100.0 * (best["measured_ms"] / min(r["measured_ms"] for r in real) - 1.0)
    return out


def fmt(v, spec):
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def interval(fig, key, spec):
    lo_hi = fig.get("interval_95", {}).get(key)
    return f"[{fmt(lo_hi[0], spec)}, {fmt(lo_hi[1], spec)}]" if lo_hi else "n/a"


def rounds_text(rounds):
    return f"about {rounds} rounds" if rounds else "more rounds than can be run"


def outlook_lines(outlook):
    """What the floor would be with more rounds, from the plans' round-to-round spread (fidelity_noise.py)."""
    if not outlook:
        return []
    at, pair = outlook["expected_at_rounds"], outlook["closest_pair"]
    mape, tau = outlook["rounds_for_mape"], outlook["rounds_for_tau"]
    return [f"The iterations scatter by {outlook['spread_pct']['median']:.1f} % round to round (median over the "
            f"plans, at most {outlook['spread_pct']['max']:.1f} %): the floor to expect at {at['rounds']} rounds is "
            f"MAPE {at['mape_pct']:.1f} %, tau {fmt(at['kendall_tau'], '.2f')}; a floor of MAPE <= "
            f"{mape['target_pct']} % takes {rounds_text(mape['rounds'])} (--iters), tau >= {tau['target']} "
            f"{rounds_text(tau['rounds'])}"
            + (f" (the closest plans, {pair['plans'][0]} and {pair['plans'][1]}, lie {pair['gap_pct']:.2f} % apart)"
               if pair else ""), ""]


def uncertainty_lines(fig):
    lines = []
    if "interval_95" in fig:
        lines += [f"95 % intervals (bootstrap over each plan's iterations, {BOOTSTRAP_RESAMPLES} resamples): "
                  f"MAPE {interval(fig, 'mape_pct', '.1f')} %, Kendall tau {interval(fig, 'kendall_tau', '.2f')}, "
                  f"regret {interval(fig, 'regret_pct', '.1f')} %", ""]
    half = fig.get("split_half")
    if half:
        variants = [("drift_divided_out", "the drift common to each round divided out (every sample over its "
                     "round's geometric mean across plans)"),
                    ("compute_speed_taken_out", "each iteration's compute speed taken out (minus the larger of the "
                     "ranks' compute time above their median)")]
        lines += [f"Noise floor, split-half (odd against even interleaved rounds, {half['rounds']} rounds): "
                  f"MAPE {half['mape_pct']:.1f} %, Kendall tau {fmt(half['kendall_tau'], '.2f')}"
                  + "".join(f"; with {what}: MAPE {half[key]['mape_pct']:.1f} %, Kendall tau "
                            f"{fmt(half[key]['kendall_tau'], '.2f')}" for key, what in variants if key in half),
                  ""] + outlook_lines(half.get("outlook"))
    near = fig.get("bound")
    if near and "tuned_fraction" in near:
        t = near["tuned_fraction"]
        share = near.get("comm_share_of_megatron_async")
        lines += [f"The tuner's pick reaches {t['median']:.3f} of the no-comm bound, measured in the launch "
                  f"(p10-p90 over rounds {t['p10']:.3f}-{t['p90']:.3f}); communication is "
                  f"{fmt(None if share is None else 100 * share, '.0f')} % of megatron-async's time here", ""]
    speeds = fig.get("rank_speed")
    if speeds:
        no_comm = speeds["no_comm"]
        lines += [f"The ranks' compute per iteration (each rank's median): the slowest rank computed "
                  f"{100 * (speeds['min'] - 1):.1f}-{100 * (speeds['max'] - 1):.1f} % longer than the fastest over "
                  f"the plans" + (f" ({100 * (no_comm - 1):.1f} % in no-comm)" if no_comm else "")
                  + f", rank {speeds['slowest_rank_mostly']} the slowest in "
                  f"{100 * speeds['slowest_rank_share']:.0f} % of them; the model runs every rank at one speed, "
                  "so the difference is predicted as the ranks' waits at the collectives (the arrival skew)", ""]
    sp = fig.get("speedup")
    if sp:
        lines += [f"Speedup over {sp['baseline']} measured inside the launch (median over {sp['rounds']} rounds of "
                  f"the same round's ratio) against the predicted one: mean |error| "
                  f"{sp['mean_abs_error_points']:.1f} points, Kendall tau {fmt(sp['kendall_tau'], '.2f')}", "",
                  "| plan | predicted speedup | measured speedup (p10-p90 over rounds) | error points |",
                  "|---|---:|---:|---:|"]
        lines += [f"| {p['plan']} | {p['predicted']:.3f} | {p['measured']:.3f} ({p['measured_p10']:.3f}-"
                  f"{p['measured_p90']:.3f}) | {p['error_points']:+.1f} |" for p in sp["plans"]]
        lines.append("")
    return lines + comm_cost_lines(fig.get("comm_cost"))


def markdown(config, rows, meta, fig):
    lines = [f"### {config}", ""]
    desc = ", ".join(f"{k} {v}" for k, v in meta.items() if k in ("model", "profile", "link", "iters", "warmup",
                                                                   "rounds", "interleaved", "overrides", "boost", "load_average",
                                                                   "calibrated_on"))
    if desc:
        lines += [desc, ""]
    lines += ["| plan | predicted ms | measured ms (mean) | error % | measured median / min ms | "
              "exposed comm ms pred / meas | op err median % |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "error_pct" not in r:
            lines.append(f"| {r['plan']} | | | {r['status']} | | | |")
            continue
        not_scored = fig.get("not_scored")
        excluded = not_scored if isinstance(not_scored, list) else [not_scored]
        plan = r["plan"] + (" (calibration plan, not scored)" if r["plan"] in excluded else
                            " (comm-off run, not scored)" if is_comm_off_run(r["plan"]) else "")
        lines.append(f"| {plan} | {r['predicted_ms']:.1f} | {r['measured_ms']:.1f} | {r['error_pct']:+.1f} | "
                     f"{r['measured_median_ms']:.1f} / {r['measured_min_ms']:.1f} | "
                     f"{fmt(r.get('predicted_exposed_comm_ms'), '.1f')} / {fmt(r.get('measured_exposed_comm_ms'), '.1f')} | "
                     f"{fmt(r.get('op_error_median_pct'), '.1f')} |")
    lines += ["",
              f"MAPE {fmt(fig.get('mape_pct'), '.1f')} % (goal <= 3), "
              f"Kendall tau {fmt(fig.get('kendall_tau'), '.2f')} (goal >= 0.85), "
              f"tuner regret {fmt(fig.get('regret_pct'), '.1f')} % (goal <= 2; best measured: "
              f"{fig.get('best_measured_plan', 'n/a')}, best predicted: {fig.get('best_predicted_plan', 'n/a')}); "
              f"{fig['plans_measured']} of {fig['plans']} plans measured and scored", ""]
    twin = fig.get("tuned_twin")
    if twin:
        ratio = twin["round_ratio"]
        lines += [f"The tuner's pick is {twin['plan']}'s schedule op for op: measured twice in this launch, the two "
                  f"means are {twin['gap_pct']:+.1f} % apart (per round {ratio['median']:.3f}, p10-p90 "
                  f"{ratio['p10']:.3f}-{ratio['p90']:.3f}), the measurement's own noise" +
                  ("; MAPE, tau, regret, the split-half and the speedups count the one schedule once, at the mean "
                   "of its two runs round by round" if twin["scored"] else ""), ""]
    lines += uncertainty_lines(fig)
    kinds = fig.get("op_error_by_kind")
    if kinds:
        lines += ["Per-op duration error by kind, the median over the scored plans of each plan's median (goal: GEMM "
                  "<= 10 %, every other kind <= 15 %), its 95 % interval (bootstrap over the plans) in brackets, and "
                  "the measured ops' spread over the iterations (half their p10-p90 width over the median): " +
                  ", ".join(f"{k} {v['median_pct']:.1f} % [{v['interval_95'][0]:.1f}, {v['interval_95'][1]:.1f}]" +
                            (f" ({v['spread_pct']:.0f} %)" if v["spread_pct"] is not None else "")
                            for k, v in kinds.items()), ""]
    waits = fig.get("arrival_wait_by_phase")
    if waits:
        lines += ["The collectives' wait for the last rank, the mean per collective over the scored plans, predicted "
                  "against measured: " + ", ".join(f"{phase} {w['predicted_mean_us']:.0f} against "
                                                   f"{w['measured_mean_us']:.0f} us ({w['collectives']} collectives)"
                                                   for phase, w in waits.items()), ""]
    exposed = fig.get("exposed_comm")
    if exposed:
        lines += [f"Exposed communication (communication while no compute op runs, both traces counted alike by "
                  f"domino-compare), the mean over the {exposed['plans']} scored plans that communicate: "
                  f"{exposed['predicted_mean_ms']:.1f} ms predicted against {exposed['measured_mean_ms']:.1f} "
                  f"measured, {exposed['mean_abs_error_ms']:.1f} ms apart per plan", ""]
    rep = fig.get("repeatability")
    if rep:
        taus = [t for t in rep["kendall_tau"] if t is not None]
        lines += [f"Repeatability of the measurement (each of {rep['rounds']} rounds against the others' mean): "
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
        fig = figures(rows, meta.get("calibrated_on"), bool(meta.get("interleaved")))
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
