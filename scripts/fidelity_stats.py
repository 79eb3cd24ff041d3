"""fidelity_stats.py: the statistics the fidelity table scores with (plain python3, standard library only)."""
import math


def median(values):
    v = sorted(values)
    n = len(v)
    if n == 0:
        return float("nan")
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def mean(values):
    """The arithmetic mean; nan for no values. A plan's measured time is its mean iteration: training's
    throughput (tokens per second) is tokens per mean iteration."""
    return sum(values) / len(values) if values else float("nan")


def percentile(values, pct):
    """Linear-interpolated percentile (0..100), as domino-exec's summaries compute it."""
    v = sorted(values)
    if not v:
        return float("nan")
    pos = pct / 100.0 * (len(v) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


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


def waits_by_phase(rows):
    """Per phase of the iteration (fwd, bwd, ...), over the rows' plans: the mean arrival wait per split collective,
    predicted and measured (each row's domino-compare arrival_wait_by_phase, weighted by its collectives)."""
    sums = {}
    for r in rows:
        for phase, w in (r.get("waits_by_phase") or {}).items():
            s = sums.setdefault(phase, [0, 0.0, 0.0])
            s[0] += w["count"]
            s[1] += w["count"] * w["predicted_mean_us"]
            s[2] += w["count"] * w["measured_mean_us"]
    return {phase: {"collectives": n, "predicted_mean_us": p / n, "measured_mean_us": m / n}
            for phase, (n, p, m) in sorted(sums.items()) if n > 0}
