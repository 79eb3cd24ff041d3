"""fidelity_twin.py: the tuner's pick and its schedule twin in the fidelity table (plain python3, standard
library only).

The tuner often picks a named strategy's plan; the launch then runs one schedule twice, under two names. The
two runs' gap is the measurement's own noise, reported as such. Every figure that ranks or averages plans
counts that schedule once, at the mean of its two runs round by round: two runs of one schedule have no order
to find (the split-half would score a coin toss between them, the model's tau a predicted tie against a
measured difference), and the schedule would weigh twice in every mean.
"""
import json

from fidelity_stats import mean, median, percentile

TUNED = "tuned"


def load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def predicted_ops(row):
    """The ops of a row's predicted trace (name, rank, stream, start, duration), or None without the trace."""
    trace = load_json(row["pred_trace"]) if row.get("pred_trace") else None
    if not isinstance(trace, dict):
        return None
    return [(e.get("name"), e.get("pid"), e.get("tid"), e.get("ts"), e.get("dur"))
            for e in trace.get("traceEvents", []) if e.get("ph") == "X"]


def schedule_twin(rows):
    """(the tuner's pick, the measured plan whose predicted schedule is the pick's op for op), or None."""
    tuned = next((r for r in rows if r["plan"] == TUNED and "error_pct" in r), None)
    ops = predicted_ops(tuned) if tuned else None
    if not ops:
        return None
    for r in rows:
        if r is not tuned and "error_pct" in r and r["predicted_ms"] == tuned["predicted_ms"] \
                and predicted_ops(r) == ops:
            return tuned, r
    return None


def twin_gap(rows, ok):
    """The tuner's pick against its schedule twin: the gap of their mean times and, per interleaved round, the
    median and p10-p90 of the pick's time over the twin's; scored: whether the twin is among the scored rows."""
    pair = schedule_twin(rows)
    if pair is None:
        return None
    tuned, twin = pair
    rounds = min(len(tuned["measured_samples_ms"]), len(twin["measured_samples_ms"]))
    per_round = [a / b for a, b in zip(tuned["measured_samples_ms"][:rounds], twin["measured_samples_ms"][:rounds])]
    return {"plan": twin["plan"], "scored": any(r is twin for r in ok),
            "gap_pct": 100.0 * (tuned["measured_ms"] / twin["measured_ms"] - 1.0),
            "round_ratio": {"median": median(per_round), "p10": percentile(per_round, 10),
                            "p90": percentile(per_round, 90)}}


def pairwise_mean(a, b):
    return [(x + y) / 2 for x, y in zip(a, b)]


def one_row_per_schedule(ok, twin_plan):
    """(the scored rows with the tuner's pick and its twin `twin_plan` as one row, the name the pick goes by
    there). The row keeps the twin's name and prediction; its samples, per-launch samples and per-rank compute
    times are the two runs' means, iteration by iteration (an interleaved launch runs both in every round).
    Without a scored twin: the rows as they are, and the pick as "tuned"."""
    tuned = next((r for r in ok if r["plan"] == TUNED), None)
    twin = next((r for r in ok if r["plan"] == twin_plan), None) if twin_plan else None
    if tuned is None or twin is None:
        return ok, TUNED
    merged = dict(twin)
    merged["measured_samples_ms"] = pairwise_mean(tuned["measured_samples_ms"], twin["measured_samples_ms"])
    merged["measured_rounds_ms"] = [pairwise_mean(a, b)
                                    for a, b in zip(tuned["measured_rounds_ms"], twin["measured_rounds_ms"])]
    if "compute_busy_ms" in tuned and "compute_busy_ms" in twin:
        merged["compute_busy_ms"] = [pairwise_mean(a, b)
                                     for a, b in zip(tuned["compute_busy_ms"], twin["compute_busy_ms"])]
    else:
        merged.pop("compute_busy_ms", None)
    merged["measured_ms"] = mean(merged["measured_samples_ms"])
    merged["error_pct"] = 100.0 * (merged["predicted_ms"] - merged["measured_ms"]) / merged["measured_ms"]
    return [merged if r is twin else r for r in ok if r is not tuned], twin_plan
