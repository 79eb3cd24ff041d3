// calibrate_comm.cpp: the communication terms of a calibration (see calibrate_terms.hpp): the AllReduce's
// latency and bandwidth scale, the ranks' arrival skew at the AllReduces (sync_us), and the interference
// slowdowns of each stream while the other runs.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "sim/fit/calibrate_terms.hpp"
#include "sim/fit/stats.hpp"

namespace domino::prof::calibration {

namespace {

// The AllReduces a collective fit uses: none on a group of one.
std::vector<const Sample*> allreduce_samples(const TraceSamples& in) {
  if (in.tp <= 1) return {};
  return in.select([](OpKind k) { return k == OpKind::AllReduce; });
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
    if (s[i]->overlap <= 0.05 * s[i]->dur) continue;
    ++n;
    total_overlap += s[i]->overlap;
    so += s[i]->overlap * s[i]->overlap;
    sor += s[i]->overlap * (s[i]->dur - base[i]);
  }
  if (n < 3 || total_overlap < 0.02 * total || !(so > 0)) return std::nullopt;
  const double u = std::clamp(sor / so, 0.0, 0.9);
  return u / (1 - u);
}

// The slowdown of one stream (comm: the AllReduces) against `cm`, the calibrated costs without interference.
void fit_stream_slowdown(const TraceSamples& in, const CostModel& cm, bool comm, Profile& p, std::string& report) {
  std::vector<const Sample*> sel;
  std::vector<double> pred;
  // An AllReduce sample is the rank that waited least: without the arrival skew.
  const double skew = comm ? group_collective(p, in.tp).sync_us : 0;
  for (const Sample& s : in.samples) {
    if ((s.op.kind == OpKind::AllReduce) != comm) continue;
    sel.push_back(&s);
    pred.push_back(cm.op_us(s.op, in.tp, in.devices_per_node) - skew);
  }
  const auto slow = fit_slowdown(sel, pred);
  double& field = comm ? p.interference.comm_slowdown_during_compute : p.interference.compute_slowdown_during_comm;
  if (slow) {
    report += fmt::format("interference: {} slowdown {:.3f} -> {:.3f}\n", comm ? "comm" : "compute", field, *slow);
    field = *slow;
  }
}

}  // namespace

// t = latency + c * (old bandwidth term) on the rank that waited least; the tables keep their shape. Each op's
// old term is that of the algorithm the base profile picks for it; the fitted latency replaces the latency of
// every algorithm the ops used, and every algorithm's bandwidth scales by the same factor.
void fit_allreduce(const TraceSamples& in, Profile& p, std::string& report) {
  const auto sel = allreduce_samples(in);
  if (sel.empty()) return;
  const CostModel cm(in.base);
  const CollectiveProfile& old = group_collective(in.base, in.tp);
  std::vector<double> x, y;
  double smin = 1e300, smax = 0;
  bool used[kNumCollectiveAlgorithms] = {};
  for (const Sample* s : sel) {
    const CollectiveCost t = cm.allreduce(s->op.bytes, in.tp, in.devices_per_node);
    const auto algorithm = collective_algorithm_from_name(t.algorithm).value_or(CollectiveAlgorithm::Ring);
    used[int(algorithm)] = true;
    const double latency = algorithm == CollectiveAlgorithm::Nvls ? old.nvls->latency_us : old.latency_us;
    x.push_back(t.us - old.sync_us - latency);
    y.push_back(in.interference_free(*s));
    smin = std::min(smin, s->op.bytes), smax = std::max(smax, s->op.bytes);
  }
  CollectiveProfile& c = group_collective(p, in.tp);
  // The latency the ops paid: NVLS's when they all ran NVLS (one message size always picks one algorithm).
  const bool only_nvls = used[int(CollectiveAlgorithm::Nvls)] && !used[int(CollectiveAlgorithm::Ring)];
  const double old_latency = only_nvls ? c.nvls->latency_us : c.latency_us;
  LineFit f;
  if (smax >= 2 * smin) f = fit_line(x, y, relative_weights(y));
  if (!f.ok || f.a < 0 || !(f.b > 0)) f = scale_bandwidth_term(x, y, f, old_latency);
  if (!f.ok || !(f.b > 0)) return;
  report += fmt::format("allreduce ({} ops, {} .. {} B): latency {:.3g} -> {:.3g} us, bus bandwidth x {:.3f}{}\n",
                        sel.size(), int64_t(smin), int64_t(smax), old_latency, f.a, 1 / f.b,
                        smax >= 2 * smin ? "" : " (one message size: latency kept)");
  const auto rescale = [&](double& latency, double& busbw, std::vector<BusBandwidthPoint>& table, bool was_used) {
    if (was_used) latency = f.a;
    busbw /= f.b;
    for (auto& r : table) r.bus_bandwidth_gbps /= f.b;
  };
  rescale(c.latency_us, c.bus_bandwidth_gbps, c.table, used[int(CollectiveAlgorithm::Ring)]);
  if (c.nvls) rescale(c.nvls->latency_us, c.nvls->bus_bandwidth_gbps, c.nvls->table, used[int(CollectiveAlgorithm::Nvls)]);
}

// The ranks' arrival skew, seen directly in a multi-rank trace: the median over the AllReduces is sync_us.
void fit_arrival_skew(const TraceSamples& in, Profile& p, std::string& report) {
  if (allreduce_samples(in).empty()) return;
  std::vector<double> skews;
  for (const Sample& s : in.samples)
    if (s.skew >= 0) skews.push_back(s.skew);
  if (skews.size() < 3) return;
  CollectiveProfile& c = group_collective(p, in.tp);
  const double sync = median_of(skews);
  report += fmt::format("allreduce arrival skew (median over {} ops): sync {:.3g} -> {:.3g} us\n", skews.size(),
                        c.sync_us, sync);
  c.sync_us = sync;
}

// From ops that overlapped the other stream, against the calibrated base costs.
void fit_interference(const TraceSamples& in, Profile& p, std::string& report) {
  Profile no_interference = p;
  no_interference.interference = {};
  const CostModel cm(no_interference);
  for (bool comm : {false, true}) fit_stream_slowdown(in, cm, comm, p, report);
}

}  // namespace domino::prof::calibration
