// calibrate_comm.cpp: the communication terms of a calibration (see calibrate_terms.hpp): each collective
// kind's latency and bandwidth scale, the ranks' arrival skew at the collectives (sync_us and its growth with
// the compute between them, sync_per_compute; or sync_us from the iteration time), and the interference
// slowdowns of each stream while the other runs.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "sim/base/error.hpp"
#include "sim/fit/calibrate_terms.hpp"
#include "sim/fit/stats.hpp"

namespace domino::prof::calibration {

namespace {

// The compute between collectives must differ by this fraction of its largest value, and the slope of the
// skew against it must stand this many standard errors above 0 (about 95 % one-sided), for the skew's
// growth with the compute to be told from noise; otherwise the skew is taken as constant.
constexpr double kMinComputeSpread = 0.25;
constexpr double kMinSlopeStandardErrors = 2.0;
// An op that overlapped the other stream for more than this share of its time (the slowdowns' samples), and
// a collective at least this much of whose time the compute stream was busy (the comm delay's samples).
constexpr double kOverlapped = 0.05;
constexpr double kMostlyBeside = 0.7;

// Share of the variance of y the line explains.
double r_squared(const std::vector<double>& x, const std::vector<double>& y, const LineFit& f) {
  const double mean = mean_of(y);
  double total = 0, residual = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    total += (y[i] - mean) * (y[i] - mean);
    residual += (y[i] - f.a - f.b * x[i]) * (y[i] - f.a - f.b * x[i]);
  }
  return total > 0 ? 1 - residual / total : 0;
}

// Standard errors of the slope of a least-squares line with the given R^2 over n points.
double slope_standard_errors(double r2, size_t n) {
  if (n < 3 || !(r2 > 0)) return 0;
  return r2 >= 1 ? 1e300 : std::sqrt(r2 * double(n - 2) / (1 - r2));
}

// The ops of one collective kind a fit uses: none on a group of one.
std::vector<const Sample*> collective_samples(const TraceSamples& in, OpKind kind) {
  if (in.tp <= 1) return {};
  return in.select([kind](OpKind k) { return k == kind; });
}

// One message size (or noise): keep the latency, scale the bandwidth term by total time.
LineFit scale_bandwidth_term(const std::vector<double>& x, const std::vector<double>& y, const LineFit& f,
                             double latency_us) {
  const double a = f.ok && f.a < 0 ? 0 : latency_us;
  double sy = 0, sx = 0;
  for (size_t i = 0; i < x.size(); ++i) sy += y[i] - a, sx += x[i];
  return {a, sx > 0 && sy > 0 ? sy / sx : 0, sx > 0 && sy > 0};
}

// Interference: d = base + overlap * u, u = s / (1 + s) (CostModel's progress-rate model); s from u.
std::optional<double> fit_slowdown(const std::vector<const Sample*>& s, const std::vector<double>& base) {
  double so = 0, sor = 0, total_overlap = 0, total = 0;
  int n = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    total += s[i]->dur;
    if (s[i]->overlap <= kOverlapped * s[i]->dur) continue;
    ++n;
    total_overlap += s[i]->overlap;
    so += s[i]->overlap * s[i]->overlap;
    sor += s[i]->overlap * (s[i]->dur - base[i]);
  }
  if (n < 3 || total_overlap < 0.02 * total || !(so > 0)) return std::nullopt;
  const double u = std::clamp(sor / so, 0.0, 0.9);
  return u / (1 - u);
}

// The collectives' slowdown beside the profile's delay (held): their surcharge, overlap x (1 - rate(simulated
// time)), against their measured excess over the base cost (the rank that waited least; the simulator's time
// adds the skew), of least squared error on a grid of 0.01 up to kMaxFittedSlowdown (the rate is not linear
// in the slowdown).
// nullopt with fewer than 3 overlapped collectives.
std::optional<double> fit_slowdown_beside_delay(const std::vector<const Sample*>& s,
                                                const std::vector<double>& base, double skew,
                                                InterferenceProfile i) {
  std::vector<size_t> overlapped;
  for (size_t k = 0; k < s.size(); ++k)
    if (s[k]->overlap > kOverlapped * s[k]->dur) overlapped.push_back(k);
  if (overlapped.size() < 3) return std::nullopt;
  double best = 0, best_error = 1e300;
  constexpr double kStep = 0.01;
  for (int step = 0; step <= int(std::lround(kMaxFittedSlowdown / kStep)); ++step) {
    i.comm_slowdown_during_compute = kStep * step;
    double error = 0;
    for (size_t k : overlapped) {
      const double miss = s[k]->overlap * (1 - i.comm_rate(base[k] + skew)) - (s[k]->dur - base[k]);
      error += miss * miss;
    }
    if (error < best_error) best_error = error, best = i.comm_slowdown_during_compute;
  }
  return best;
}

// The ops of one stream (comm: the collectives) with their costs against `cm` (the calibrated costs without
// interference); a collective's without the arrival skew: its sample is the rank that waited least.
std::pair<std::vector<const Sample*>, std::vector<double>> stream_samples(const TraceSamples& in,
                                                                          const CostModel& cm, bool comm,
                                                                          double skew) {
  std::pair<std::vector<const Sample*>, std::vector<double>> out;
  for (const Sample& s : in.samples) {
    if (collective(s.op.kind) != comm) continue;
    out.first.push_back(&s);
    out.second.push_back(cm.op_us(s.op, in.tp, in.devices_per_node) - skew);
  }
  return out;
}

// The slowdown of one stream (comm: the collectives, beside the profile's delay) against `cm`.
void fit_stream_slowdown(const TraceSamples& in, const CostModel& cm, bool comm, Profile& p,
                         std::string& report) {
  const double skew = comm ? group_collective(p, in.tp).sync_us : 0;
  const auto [sel, base] = stream_samples(in, cm, comm, skew);
  const std::optional<double> slow = comm && p.interference.comm_delay_during_compute_us > 0
                                         ? fit_slowdown_beside_delay(sel, base, skew, p.interference)
                                         : fit_slowdown(sel, base);
  double& field = comm ? p.interference.comm_slowdown_during_compute : p.interference.compute_slowdown_during_comm;
  if (slow) {
    report += fmt::format("interference: {} slowdown {:.3f} -> {:.3f}\n", comm ? "comm" : "compute", field, *slow);
    field = *slow;
  }
}

CostModel without_interference(const Profile& p) {
  Profile none = p;
  none.interference = {};
  return CostModel(none);
}

}  // namespace

std::optional<AlgorithmCurves> kind_curves(const CollectiveProfile& c, OpKind kind) {
  if (kind == OpKind::AllReduce) return AlgorithmCurves{c.ring(), c.nvls};
  return kind == OpKind::AllGather ? c.allgather : c.reduce_scatter;
}

void divide_bus_bandwidth(CollectiveCurve& curve, double divisor) {
  curve.bus_bandwidth_gbps /= divisor;
  for (auto& row : curve.table) row.bus_bandwidth_gbps /= divisor;
}

void set_kind_curves(CollectiveProfile& c, OpKind kind, const AlgorithmCurves& k) {
  if (kind == OpKind::AllGather) c.allgather = k;
  if (kind == OpKind::ReduceScatter) c.reduce_scatter = k;
  if (kind != OpKind::AllReduce) return;
  c.latency_us = k.ring.latency_us;
  c.bus_bandwidth_gbps = k.ring.bus_bandwidth_gbps;
  c.table = k.ring.table;
  c.nvls = k.nvls;
}

// t = latency + c * (old bandwidth term) on the rank that waited least; the tables keep their shape. Each op's
// old term is that of the algorithm the base profile picks for it; the fitted latency replaces the latency of
// every algorithm the ops used, and every algorithm's bandwidth scales by the same factor. A kind the base
// profile has no curves for is left out (costing its ops names the missing curve).
void fit_collective(const TraceSamples& in, OpKind kind, Profile& p, std::string& report) {
  const auto sel = collective_samples(in, kind);
  const std::optional<AlgorithmCurves> old = kind_curves(group_collective(in.base, in.tp), kind);
  if (sel.empty() || !old) return;
  const CostModel cm(in.base);
  const double sync = group_collective(in.base, in.tp).sync_us;
  std::vector<double> x, y;
  double smin = 1e300, smax = 0;
  bool used[kNumCollectiveAlgorithms] = {};
  for (const Sample* s : sel) {
    const CollectiveCost t = cm.collective_cost(kind, s->op.bytes, in.tp, in.devices_per_node);
    const auto algorithm = collective_algorithm_from_name(t.algorithm).value_or(CollectiveAlgorithm::Ring);
    used[int(algorithm)] = true;
    const double latency = algorithm == CollectiveAlgorithm::Nvls ? old->nvls->latency_us : old->ring.latency_us;
    x.push_back(t.us - sync - latency);
    y.push_back(in.interference_free(*s));
    smin = std::min(smin, s->op.bytes), smax = std::max(smax, s->op.bytes);
  }
  AlgorithmCurves c = *kind_curves(group_collective(p, in.tp), kind);
  // The latency the ops paid: NVLS's when they all ran NVLS (one message size always picks one algorithm).
  const bool only_nvls = used[int(CollectiveAlgorithm::Nvls)] && !used[int(CollectiveAlgorithm::Ring)];
  const double old_latency = only_nvls ? c.nvls->latency_us : c.ring.latency_us;
  LineFit f;
  if (smax >= 2 * smin) f = fit_line(x, y, relative_weights(y));
  if (!f.ok || f.a < 0 || !(f.b > 0)) f = scale_bandwidth_term(x, y, f, old_latency);
  if (!f.ok || !(f.b > 0)) return;
  report += fmt::format("{} ({} ops, {} .. {} B): latency {:.3g} -> {:.3g} us, bus bandwidth x {:.3f}{}\n",
                        to_string(kind), sel.size(), int64_t(smin), int64_t(smax), old_latency, f.a, 1 / f.b,
                        smax >= 2 * smin ? "" : " (one message size: latency kept)");
  const auto rescale = [&](CollectiveCurve& curve, bool was_used) {
    if (was_used) curve.latency_us = f.a;
    divide_bus_bandwidth(curve, f.b);
  };
  rescale(c.ring, used[int(CollectiveAlgorithm::Ring)]);
  if (c.nvls) rescale(*c.nvls, used[int(CollectiveAlgorithm::Nvls)]);
  set_kind_curves(group_collective(p, in.tp), kind, c);
}

namespace {

// The mean skew as the constant sync_us, without growth; `why` says why not the growth ("" when not asked).
// The mean, not the median: the traced iteration (the one nearest the median time) paid every collective's
// wait, and a few long waits among many short ones are part of what it paid. Re-scored on eight launches,
// the iteration-time MAPE was lower or equal with the mean in all eight (docs/fidelity.md).
void set_constant_skew(const std::vector<double>& skews, const std::string& what, const std::string& why,
                       CollectiveProfile& c, std::string& report) {
  const double sync = mean_of(skews);
  report +=
      fmt::format("{} (mean over {} ops): sync {:.3g} -> {:.3g} us", what, skews.size(), c.sync_us, sync);
  if (c.sync_per_compute > 0 || !why.empty())
    report += fmt::format(", sync_per_compute {:.3g} -> 0{}", c.sync_per_compute, why.empty() ? "" : " (" + why + ")");
  report += "\n";
  c.sync_us = sync;
  c.sync_per_compute = 0;
}

// Fewer timed iterations than this in a trace: the skew from its one traced iteration, as before.
constexpr size_t kMinSkewIterations = 5;

// Per timed iteration in which every one of the tp ranks ran all of `skewed` (op indices): the mean over
// those collectives of the last rank's arrival after the median rank's.
std::vector<double> mean_skew_per_iteration(const std::vector<std::vector<TraceEvent>>& iterations,
                                            const std::set<int>& skewed, int tp) {
  std::vector<double> out;
  for (const std::vector<TraceEvent>& events : iterations) {
    std::map<int, std::vector<double>> arrivals;
    for (const TraceEvent& e : events)
      if (e.args.contains("op") && e.args["op"].is_number_integer() &&
          skewed.count(int(e.args["op"].get<int64_t>())))
        arrivals[int(e.args["op"].get<int64_t>())].push_back(e.start_us);
    if (arrivals.size() != skewed.size()) continue;
    double total = 0;
    bool every_rank = true;
    for (auto& [index, a] : arrivals) {
      every_rank = every_rank && int(a.size()) == tp;
      total += wait_for_last(std::move(a));
    }
    if (every_rank) out.push_back(total / double(skewed.size()));
  }
  return out;
}

// The skew of the median iteration: the median over the timed iterations of each one's mean skew. Which rank
// runs slower changes from one iteration to the next on a shared host (one rank 2-5 ms behind at every
// collective in some iterations, the two alternating in others), and the one traced iteration shows one such
// state: 274 us fitted on it in one launch, 976 us on all 30 of its iterations.
void set_pooled_skew(std::vector<double> per_iteration, size_t ops, const std::string& what,
                     CollectiveProfile& c, std::string& report) {
  const size_t n = per_iteration.size();
  const double sync = median_of(std::move(per_iteration));
  report +=
      fmt::format("{} (median over {} iterations of the mean over {} ops): sync {:.3g} -> {:.3g} us{}\n",
                  what, n, ops, c.sync_us, sync,
                  c.sync_per_compute > 0 ? fmt::format(", sync_per_compute {:.3g} -> 0", c.sync_per_compute)
                                         : std::string());
  c.sync_us = sync;
  c.sync_per_compute = 0;
}

// skew = a + b x compute between collectives by least squares, b only where it stands out of the noise.
void fit_skew_growth(const std::vector<double>& skews, const std::vector<double>& between, const std::string& what,
                     CollectiveProfile& c, std::string& report) {
  const auto [least, most] = std::minmax_element(between.begin(), between.end());
  if (!(*most > 0 && *most - *least >= kMinComputeSpread * *most))
    return set_constant_skew(skews, what, "the collectives hardly differ in the compute between them", c, report);
  const std::vector<double> unit(skews.size(), 1.0);
  LineFit f = fit_line(between, skews, unit);
  const double r2 = f.ok ? r_squared(between, skews, f) : 0;
  if (!f.ok || !(f.b > 0) || slope_standard_errors(r2, skews.size()) < kMinSlopeStandardErrors)
    return set_constant_skew(skews, what,
                             fmt::format("the skew does not grow with the compute between collectives ({:.0f} .. "
                                         "{:.0f} us) beyond noise: slope {:.3g}, R^2 {:.2f}",
                                         *least, *most, f.ok ? f.b : 0.0, r2),
                             c, report);
  if (f.a < 0) f = fit_slope(between, skews, unit, 0.0);
  const double rate = std::min(f.b, 1.0);
  report += fmt::format(
      "{} ({} ops): sync {:.3g} -> {:.3g} us, sync_per_compute {:.3g} -> {:.3g} (least squares on "
      "the compute between collectives, {:.0f} .. {:.0f} us; R^2 {:.2f}; mean skew {:.3g} us)\n",
      what, skews.size(), c.sync_us, f.a, c.sync_per_compute, rate, *least, *most,
      r_squared(between, skews, {f.a, rate, true}), mean_of(skews));
  c.sync_us = f.a;
  c.sync_per_compute = rate;
}

}  // namespace

// The ranks' arrival skew, seen directly in a multi-rank trace: the mean over the collectives they reach
// apart (not aligned: the simulator charges the aligned none) is sync_us; with growth, skew = sync_us +
// sync_per_compute x the compute between collectives (the simulator's arrival_skew.hpp) by least squares, the
// mean alone where the skew does not grow with that compute beyond noise or the trace's collectives hardly
// differ in it; an intercept below 0 is refitted through the origin.
void fit_arrival_skew(const TraceSamples& in, const std::vector<std::vector<TraceEvent>>& iterations,
                      bool growth, Profile& p, std::string& report) {
  if (in.tp <= 1) return;
  std::vector<double> skews, between;
  std::set<int> skewed;  // op indices
  bool only_allreduce = true;
  for (const Sample& s : in.samples)
    if (s.skew >= 0 && !s.aligned) {
      skews.push_back(s.skew);
      between.push_back(std::max(0.0, s.compute_between));
      skewed.insert(s.index);
      only_allreduce = only_allreduce && s.op.kind == OpKind::AllReduce;
    }
  if (skews.size() < 3) return;
  CollectiveProfile& c = group_collective(p, in.tp);
  const std::string what = only_allreduce ? "allreduce arrival skew" : "collective arrival skew";
  const std::vector<double> per_iteration = mean_skew_per_iteration(iterations, skewed, in.tp);
  if (growth)
    fit_skew_growth(skews, between, what, c, report);
  else if (per_iteration.size() >= kMinSkewIterations)
    set_pooled_skew(per_iteration, skewed.size(), what, c, report);
  else
    set_constant_skew(skews, what, "", c, report);
}

// The trace's streams may overlap for at most this share of its iteration: beyond it the iteration is no
// longer the sum of its ops' costs.
constexpr double kMaxOverlapShare = 0.05;

// Everything the profile's curves miss per collective inside a training step lands in sync_us: the mean wait
// for the last rank and a transfer that runs slower between compute ops than in the profiler's probe (one
// after a barrier). The compute ops are costed by p as it stands, so fit them first (on a no-comm trace) for
// the skew not to absorb their error. With `growth` it lands in sync_per_compute instead, per microsecond of
// the compute between the collectives (the trace's own, as Sample::compute_between measures it), so that a
// plan pays for that compute and not per collective.
void fit_skew_to_iteration(const TraceSamples& in, double iteration_us, bool growth, Profile& p,
                           std::string& report) {
  if (in.tp <= 1)
    throw_bad_input("--fit sync_iteration: the trace has one rank, so no collective waits for another");
  Profile without_skew = p;
  group_collective(without_skew, in.tp).sync_us = 0;
  group_collective(without_skew, in.tp).sync_per_compute = 0;
  const SerialCost serial = in.serial_cost(CostModel(without_skew), p.interference.compute_stall_share,
                                           p.interference.compute_stall_per_op_us);
  const double costs = serial.us, overlapped = serial.overlapped_us;
  const int collectives = serial.skewed_collectives;
  if (collectives == 0)
    throw_bad_input(
        "--fit sync_iteration: the trace has no collective to charge a skew to (none that the ranks "
        "reach after compute)");
  if (overlapped > kMaxOverlapShare * iteration_us)
    throw_bad_input(fmt::format(
        "--fit sync_iteration needs a trace whose streams do not overlap (megatron-sync): "
        "{:.1f} ms of this trace's ops ran beside the other stream, {:.0f} % of its "
        "{:.1f} ms iteration (at most {:.0f} %)",
        overlapped / 1e3, 100 * overlapped / iteration_us, iteration_us / 1e3, 100 * kMaxOverlapShare));
  CollectiveProfile& c = group_collective(p, in.tp);
  const double excess = std::max(0.0, iteration_us - costs);
  const std::string measured = fmt::format(
      "arrival skew from the iteration time ({:.1f} ms measured, {:.1f} ms of "
      "op costs without skew, {} collectives",
      iteration_us / 1e3, costs / 1e3, collectives);
  if (growth) {
    double between = 0;
    for (const Sample& s : in.samples)
      if (collective(s.op.kind) && !s.aligned) between += std::max(0.0, s.compute_between);
    if (!(between > 0))
      throw_bad_input(
          "--fit sync_iteration,sync_growth: the trace's collectives have no compute between them");
    const double rate = std::min(excess / between, 1.0);
    report += fmt::format(
        "{}, {:.1f} ms of compute between them): sync {:.3g} -> 0 us, sync_per_compute {:.3g} -> "
        "{:.3g}\n",
        measured, between / 1e3, c.sync_us, c.sync_per_compute, rate);
    c.sync_us = 0;
    c.sync_per_compute = rate;
    return;
  }
  const double sync = excess / collectives;
  report +=
      fmt::format("{}): sync {:.3g} -> {:.3g} us{}\n", measured, c.sync_us, sync,
                  c.sync_per_compute > 0 ? fmt::format(", sync_per_compute {:.3g} -> 0", c.sync_per_compute)
                                         : std::string());
  c.sync_us = sync;
  c.sync_per_compute = 0;
}

double measured_iteration_us(const TraceFile& trace, const std::string& part) {
  // The mean over the timed iterations where the trace lists them: a machine whose speed changes from one
  // iteration to the next scatters the median of a few dozen iterations more than their mean
  // (docs/fidelity.md, "The mean iteration").
  if (const double mean = mean_iteration_us(trace); mean > 0) return mean;
  const auto it = trace.meta.find("iteration_time_us");
  if (it == trace.meta.end() || !it->is_number() || !(it->get<double>() > 0))
    throw_bad_input(trace.path + ": --fit " + part +
                    " needs the trace's iteration time (domino.iteration_time_us, written by domino-exec)");
  return it->get<double>();
}

// From ops that overlapped the other stream, against the calibrated base costs.
// A collective's per-collective delay is held as profiled (one trace's mix of overlap does not separate it
// from the slowdown); the slowdown is fitted beside it.
void fit_interference(const TraceSamples& in, Profile& p, std::string& report) {
  const CostModel cm = without_interference(p);
  for (bool comm : {false, true}) fit_stream_slowdown(in, cm, comm, p, report);
}

// The delay is the median, over the collectives that ran mostly beside compute, of their time beyond what the
// slowdown (held) explains, as if wholly beside it. Two other fits were tried on the sweep's traces and not
// kept: least squares with the slowdown free too (the slowdown went to the grid's end, 9, the delay to the
// largest excess) and, per collective, the delay that explains its partial overlap exactly
// (1 / (1 - lost share) grows without bound as a collective's loss nears its overlap: 1.4-14 ms).
// With every iteration in the trace, a collective's excess is its median over the iterations in which it ran
// mostly beside compute: from one iteration, that iteration's overlap decided which collectives counted, each
// by one duration (10-31 collectives per trace in the sweep's calibration runs, against 650-1700 runs
// pooled). The median, not the mean: the delay is part of the collective's own time, which domino-compare
// judges by its median; the rare stalls of milliseconds that raised the mean (718 against 412 us in a
// 120-round launch) are paid by the iteration, and the compute slowdown fitted after it on the iteration time
// (--fit interference_iteration) carries them.
void fit_comm_delay(const TraceSamples& in, const std::vector<std::vector<TraceEvent>>& iterations,
                    Profile& p, std::string& report) {
  const double skew = group_collective(p, in.tp).sync_us,
               slowdown = p.interference.comm_slowdown_during_compute;
  const auto [sel, base] = stream_samples(in, without_interference(p), true, skew);
  const std::map<int, std::vector<CollectiveRun>> runs = collective_runs(iterations);
  std::vector<double> excess;
  size_t pooled = 0;
  for (size_t k = 0; k < sel.size(); ++k) {
    const double expected = base[k] * (1 + slowdown);
    const auto it = runs.find(sel[k]->index);
    if (it == runs.end()) {
      if (sel[k]->overlap >= kMostlyBeside * sel[k]->dur) excess.push_back(sel[k]->dur - expected);
      continue;
    }
    std::vector<double> beside;
    for (const CollectiveRun& run : it->second)
      if (run.overlap >= kMostlyBeside * run.dur) beside.push_back(run.dur - expected);
    if (beside.empty()) continue;
    excess.push_back(median_of(beside));
    pooled += beside.size();
  }
  if (excess.size() < 3) {
    report += fmt::format("comm delay: not fitted ({} collectives ran mostly beside compute, 3 needed)\n",
                          excess.size());
    return;
  }
  const double delay = std::max(0.0, median_of(excess));
  report +=
      fmt::format("comm delay beside compute ({} collectives{}): {:.0f} -> {:.0f} us\n", excess.size(),
                  pooled > 0 ? fmt::format(", {} runs over {} iterations", pooled, iterations.size()) : "",
                  p.interference.comm_delay_during_compute_us, delay);
  p.interference.comm_delay_during_compute_us = delay;
}

}  // namespace domino::prof::calibration
