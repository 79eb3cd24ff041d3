// calibrate.cpp: per-op samples from a measured trace, then one least-squares fit per op kind (see
// calibrate.hpp). Ops that overlapped the other stream fit the interference; the others fit the base costs.
#include "sim/fit/calibrate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "sim/fit/stats.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/base/error.hpp"

namespace domino::prof {

namespace {

struct Sample {
  Op op;              // kind, shape, flops, bytes, dtype: what the cost model needs
  double dur = 0;     // measured: the slowest rank (it sets the pace at every AllReduce); AllReduce: the
                      // fastest rank, which waited least for its peer
  double overlap = 0; // time the other stream of the same rank was busy during this op
  double skew = -1;   // AllReduce on several ranks: the last rank's start minus the first's; else -1
};

const std::map<std::string, OpKind>& kinds_by_name() {
  static const std::map<std::string, OpKind> m = [] {
    std::map<std::string, OpKind> out;
    for (OpKind k : {OpKind::Gemm, OpKind::Attention, OpKind::Norm, OpKind::Activation, OpKind::Elementwise,
                     OpKind::Copy, OpKind::AllReduce, OpKind::Optimizer, OpKind::Embedding, OpKind::Loss})
      out[to_string(k)] = k;
    return out;
  }();
  return m;
}

double arg_number(const nlohmann::json& args, const char* key) {
  return args.contains(key) && args[key].is_number() ? args[key].get<double>() : 0.0;
}

DType trace_dtype(const Profile& base, const TraceFile& trace) {
  int present = 0;
  DType only = DType::BF16;
  for (int d = 0; d < kNumDTypes; ++d)
    if (base.gemm[d]) {
      ++present;
      only = DType(d);
    }
  if (present == 1) return only;
  if (trace.meta.contains("model") && trace.meta["model"].is_string()) {
    try {
      return load_model(trace.meta["model"].get<std::string>()).dtype;
    } catch (const Error&) {
    }
  }
  return only;
}

std::vector<Sample> collect(const TraceFile& trace, DType dtype) {
  // Busy intervals per (rank, stream), for the overlap of each event with the other stream.
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> busy;
  for (const TraceEvent& e : trace.events) busy[{e.rank, e.stream}].push_back({e.start_us, e.start_us + e.dur_us});
  struct PerOp {
    Op op;
    std::vector<std::pair<double, double>> dur_overlap;
    double first_start = 1e300, last_start = -1e300;
  };
  std::map<int, PerOp> ops;
  for (const TraceEvent& e : trace.events) {
    const auto kind = kinds_by_name().find(e.kind);
    if (kind == kinds_by_name().end() || !e.args.contains("op")) continue;
    PerOp& po = ops[e.args["op"].get<int>()];
    po.op.kind = kind->second;
    po.op.m = int64_t(arg_number(e.args, "m"));
    po.op.n = int64_t(arg_number(e.args, "n"));
    po.op.k = int64_t(arg_number(e.args, "k"));
    po.op.flops = e.flops;
    po.op.bytes = e.bytes;
    po.op.dtype = dtype;
    double overlap = 0;
    for (const auto& [s, t] : busy[{e.rank, 1 - e.stream}])
      overlap += std::max(0.0, std::min(t, e.start_us + e.dur_us) - std::max(s, e.start_us));
    po.dur_overlap.push_back({e.dur_us, overlap});
    po.first_start = std::min(po.first_start, e.start_us);
    po.last_start = std::max(po.last_start, e.start_us);
  }
  std::vector<Sample> out;
  for (auto& [index, po] : ops) {
    auto& v = po.dur_overlap;
    std::sort(v.begin(), v.end());
    const auto& pick = po.op.kind == OpKind::AllReduce ? v.front() : v.back();
    const double skew = po.op.kind == OpKind::AllReduce && v.size() > 1 ? po.last_start - po.first_start : -1;
    if (pick.first > 0) out.push_back({po.op, pick.first, pick.second, skew});
  }
  return out;
}

// The collective figures a TP group of tp ranks uses: inter-node when it spans nodes and the profile has them
// (as CostModel::allreduce_us chooses).
template <typename P>
auto& group_collective(P& profile, int tp) {
  return tp > profile.devices_per_node && profile.inter_node ? *profile.inter_node : profile.intra_node;
}

int band_of(double flops) { return int(std::floor(std::log10(std::max(flops, 1.0)) * 2)); }

// Scale of each band, c = sum measured / sum predicted (keeps each band's total time, which is what an
// iteration adds up; a least-squares fit on relative errors is biased low when ops are this noisy), and a
// lookup that falls back to the nearest band with data.
struct BandScales {
  std::map<int, double> c;
  double at(double flops) const {
    if (c.empty()) return 1;
    const int b = band_of(flops);
    auto best = c.begin();
    for (auto it = c.begin(); it != c.end(); ++it)
      if (std::abs(it->first - b) < std::abs(best->first - b)) best = it;
    return best->second;
  }
};

BandScales fit_bands(const std::vector<const Sample*>& s, const std::vector<double>& pred) {
  std::map<int, std::pair<double, double>> acc;  // sum measured, sum predicted
  for (size_t i = 0; i < s.size(); ++i) {
    auto& a = acc[band_of(s[i]->op.flops)];
    a.first += s[i]->dur;
    a.second += pred[i];
  }
  BandScales out;
  for (const auto& [b, a] : acc)
    if (a.second > 0) out.c[b] = a.first / a.second;
  return out;
}

void scale_curve(std::vector<EfficiencyPoint>& curve, const BandScales& bands, double* peak_tflops) {
  double top = 0;
  for (auto& p : curve) {
    p.efficiency /= bands.at(p.gflop * 1e9);
    top = std::max(top, p.efficiency);
  }
  if (top > 1 && peak_tflops) {  // faster than the old peak: raise the peak instead of breaking eff <= 1
    *peak_tflops *= top;
    for (auto& p : curve) p.efficiency /= top;
  }
  for (auto& p : curve) p.efficiency = std::clamp(p.efficiency, 1e-4, 1.0);
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

struct ErrorSum {
  double abs = 0, total = 0;
  int n = 0;
};

}  // namespace

CalibrationScope parse_calibration_scope(const std::string& list) {
  if (list.empty() || list == "all") return {};
  CalibrationScope s{false, false, false, false, false, false};
  const std::pair<const char*, bool*> names[] = {{"memory", &s.memory},       {"gemm", &s.gemm},
                                                 {"attention", &s.attention}, {"allreduce", &s.allreduce},
                                                 {"sync", &s.sync},           {"interference", &s.interference}};
  for (size_t start = 0; start <= list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string name = list.substr(start, comma - start);
    bool* flag = nullptr;
    for (const auto& [n, f] : names)
      if (name == n) flag = f;
    if (!flag)
      throw_bad_input("--fit: unknown part '" + name +
                      "' (give a comma-separated list of memory, gemm, attention, allreduce, sync, interference, or all)");
    *flag = true;
    start = comma + 1;
  }
  return s;
}

CalibrationResult calibrate_profile(const Profile& base, const TraceFile& trace, int tp, const CalibrationScope& scope) {
  if (tp <= 0) tp = trace.meta.contains("tp") && trace.meta["tp"].is_number() ? trace.meta["tp"].get<int>() : 1;
  const DType dtype = trace_dtype(base, trace);
  const std::vector<Sample> samples = collect(trace, dtype);
  if (samples.empty())
    throw_bad_input(trace.path + ": no op events with the executor's args (op, m, n, k, flops, bytes): not a "
                                 "domino trace?");
  const int dpn = base.devices_per_node;
  Profile p = base;
  std::string report;

  // Base-cost samples: ops that did not overlap the other stream (or all of a kind, corrected by the old
  // interference, when too few ran alone).
  const auto select = [&](auto pred) {
    std::vector<const Sample*> clean, all;
    for (const Sample& s : samples)
      if (pred(s.op.kind)) {
        all.push_back(&s);
        if (s.overlap <= 0.05 * s.dur) clean.push_back(&s);
      }
    return clean.size() >= 3 ? clean : all;
  };
  const auto interference_free = [&](const Profile& prof, const Sample& s) {
    const double slow = s.op.kind == OpKind::AllReduce ? prof.interference.comm_slowdown_during_compute
                                                       : prof.interference.compute_slowdown_during_comm;
    return s.dur - s.overlap * slow / (1 + slow);
  };

  // Memory-bound ops: t = launch + c * bytes / bw_old, over all of them (the general figures) and per kind
  // (memory.per_kind) where the trace has enough of a kind.
  {
    const auto fit_memory = [&](const std::vector<const Sample*>& mem, MemoryCost old) -> std::optional<MemoryCost> {
      std::vector<double> x, y;
      for (const Sample* s : mem) {
        x.push_back(s->op.bytes / (old.bandwidth_gbps * 1e3));
        y.push_back(interference_free(base, *s));
      }
      double xmin = 1e300, xmax = 0;
      for (double v : x) xmin = std::min(xmin, v), xmax = std::max(xmax, v);
      std::vector<double> w;  // 1/t, as the profiler's fit: big ops dominate an iteration, small ones are many
      for (double t : y) w.push_back(t > 0 ? 1 / t : 0);
      LineFit f;
      if (x.size() >= 2 && xmax > 2 * xmin) f = fit_line(x, y, w);
      if (!f.ok || f.a < 0) f = fit_slope(x, y, w, f.ok && f.a < 0 ? 0 : old.launch_overhead_us);
      if (!f.ok || !(f.b > 0)) return std::nullopt;
      return MemoryCost{old.bandwidth_gbps / f.b, f.a};
    };
    const auto line = [](const std::string& what, size_t n, MemoryCost from, MemoryCost to) {
      return fmt::format("{} ({}): {:.3g} -> {:.3g} GB/s, fixed cost {:.3g} -> {:.3g} us\n", what, n, from.bandwidth_gbps,
                         to.bandwidth_gbps, from.launch_overhead_us, to.launch_overhead_us);
    };
    const MemoryCost general{base.memory.bandwidth_gbps, base.memory.launch_overhead_us};
    const auto mem = select(memory_bound);
    if (auto c = scope.memory ? fit_memory(mem, general) : std::nullopt) {
      p.memory.bandwidth_gbps = c->bandwidth_gbps;
      p.memory.launch_overhead_us = c->launch_overhead_us;
      report += line("memory-bound ops", mem.size(), general, *c);
    }
    // A kind whose ops all have about one size identifies no fixed cost of its own: it starts from (and keeps)
    // the general fixed cost just fitted.
    const MemoryCost fitted{p.memory.bandwidth_gbps, p.memory.launch_overhead_us};
    for (const std::string& name : scope.memory ? memory_bound_kinds() : std::vector<std::string>{}) {
      const auto of_kind = select([&](OpKind k) { return to_string(k) == name; });
      if (of_kind.size() < 3) continue;
      const auto own = base.memory.per_kind.find(name);
      const MemoryCost old = own == base.memory.per_kind.end() ? fitted : own->second;
      if (auto c = fit_memory(of_kind, old)) {
        p.memory.per_kind[name] = *c;
        report += line("  " + name, of_kind.size(), old, *c);
      }
    }
  }

  // GEMMs and attention: a time scale per half-decade of FLOPs.
  {
    const CostModel cm(p);
    for (OpKind kind : {OpKind::Gemm, OpKind::Attention}) {
      const auto sel = select([&](OpKind k) { return k == kind; });
      if (sel.empty() || !(kind == OpKind::Gemm ? scope.gemm : scope.attention)) continue;
      std::vector<double> pred, y;
      std::vector<Sample> corrected;
      corrected.reserve(sel.size());
      for (const Sample* s : sel) {
        pred.push_back(cm.op_us(s->op, tp, dpn));
        corrected.push_back(*s);
        corrected.back().dur = interference_free(base, *s);
      }
      std::vector<const Sample*> cs;
      for (const Sample& s : corrected) cs.push_back(&s);
      const BandScales bands = fit_bands(cs, pred);
      std::string scales;
      for (const auto& [b, c] : bands.c) scales += fmt::format(" 1e{:.1f}:{:.3f}", b / 2.0, c);
      report += fmt::format("{} ({} ops): time scale per FLOP band{}\n", to_string(kind), sel.size(), scales);
      if (kind == OpKind::Gemm) {
        auto& g = p.gemm[static_cast<int>(dtype)];
        if (!g) continue;
        for (auto& r : g->table) r.time_us *= bands.at(2.0 * double(r.m) * double(r.n) * double(r.k));
        scale_curve(g->efficiency, bands, &g->peak_tflops);
      } else if (!p.attention.efficiency.empty()) {
        scale_curve(p.attention.efficiency, bands, nullptr);
      } else {
        const double c = median_of([&] {
          std::vector<double> v;
          for (const auto& [b, s] : bands.c) v.push_back(s);
          return v;
        }());
        p.attention.relative_efficiency = std::clamp(p.attention.relative_efficiency / c, 1e-4, 1.0);
      }
    }
  }

  // AllReduce: t = latency + c * (old bandwidth term) on the rank that waited least; the table keeps its
  // shape. The ranks' arrival skew, seen directly in a multi-rank trace, is the sync term.
  {
    const auto sel = select([](OpKind k) { return k == OpKind::AllReduce; });
    if (!sel.empty() && tp > 1) {
      const CostModel cm(base);
      const CollectiveProfile& old = group_collective(base, tp);
      std::vector<double> x, y, skews;
      double smin = 1e300, smax = 0;
      for (const Sample& s : samples)
        if (s.skew >= 0) skews.push_back(s.skew);
      for (const Sample* s : sel) {
        const double t = cm.allreduce_us(s->op.bytes, tp, dpn);
        x.push_back(t - old.sync_us - old.latency_us);
        y.push_back(interference_free(base, *s));
        smin = std::min(smin, s->op.bytes), smax = std::max(smax, s->op.bytes);
      }
      CollectiveProfile& c = group_collective(p, tp);
      LineFit f;
      if (smax >= 2 * smin) f = fit_line(x, y, relative_weights(y));
      if (!f.ok || f.a < 0 || !(f.b > 0)) {
        // One message size (or noise): keep the latency, scale the bandwidth term by total time.
        const double a = f.ok && f.a < 0 ? 0 : c.latency_us;
        double sy = 0, sx = 0;
        for (size_t i = 0; i < x.size(); ++i) sy += y[i] - a, sx += x[i];
        f = {a, sx > 0 && sy > 0 ? sy / sx : 0, sx > 0 && sy > 0};
      }
      if (f.ok && f.b > 0 && scope.allreduce) {
        report += fmt::format("allreduce ({} ops, {} .. {} B): latency {:.3g} -> {:.3g} us, bus bandwidth x {:.3f}{}\n",
                              sel.size(), int64_t(smin), int64_t(smax), c.latency_us, f.a, 1 / f.b,
                              smax >= 2 * smin ? "" : " (one message size: latency kept)");
        c.latency_us = f.a;
        c.bus_bandwidth_gbps /= f.b;
        for (auto& r : c.table) r.bus_bandwidth_gbps /= f.b;
      }
      if (skews.size() >= 3 && scope.sync) {
        const double sync = median_of(skews);
        report += fmt::format("allreduce arrival skew (median over {} ops): sync {:.3g} -> {:.3g} us\n", skews.size(),
                              c.sync_us, sync);
        c.sync_us = sync;
      }
    }
  }

  // Interference, from ops that overlapped the other stream, against the calibrated base costs.
  {
    Profile no_interference = p;
    no_interference.interference = {};
    const CostModel cm(no_interference);
    for (bool comm : {false, true}) {
      std::vector<const Sample*> sel;
      std::vector<double> pred;
      // An AllReduce sample is the rank that waited least: without the arrival skew.
      const double skew = comm ? group_collective(p, tp).sync_us : 0;
      for (const Sample& s : samples) {
        if ((s.op.kind == OpKind::AllReduce) != comm) continue;
        sel.push_back(&s);
        pred.push_back(cm.op_us(s.op, tp, dpn) - skew);
      }
      const auto slow = scope.interference ? fit_slowdown(sel, pred) : std::nullopt;
      double& field = comm ? p.interference.comm_slowdown_during_compute : p.interference.compute_slowdown_during_comm;
      if (slow) {
        report += fmt::format("interference: {} slowdown {:.3f} -> {:.3f}\n", comm ? "comm" : "compute", field, *slow);
        field = *slow;
      }
    }
  }
  validate_profile(p);

  // Fit quality: per kind, sum |pred - measured| / sum measured (interference applied as fitted).
  CalibrationResult res;
  const CostModel before(base), after(p);
  std::map<std::string, std::pair<ErrorSum, ErrorSum>> err;
  const auto predict = [&](const CostModel& cm, const Sample& s) {
    const double t = cm.op_us(s.op, tp, dpn);
    const double slow = s.op.kind == OpKind::AllReduce ? cm.comm_slowdown() : cm.compute_slowdown();
    return t + s.overlap * slow / (1 + slow);  // the simulator's rate model over the measured overlap
  };
  for (const Sample& s : samples) {
    for (const std::string& key : {std::string(to_string(s.op.kind)), std::string("all")}) {
      auto& [b, a] = err[key];
      b.abs += std::abs(predict(before, s) - s.dur);
      a.abs += std::abs(predict(after, s) - s.dur);
      b.total += s.dur;
      a.total += s.dur;
      ++b.n;
    }
  }
  report += "per-op error (sum |predicted - measured| / sum measured), before -> after:\n";
  for (const auto& [kind, e] : err) {
    if (kind == "all") continue;
    res.errors.push_back({kind, e.first.n, e.first.abs / e.first.total, e.second.abs / e.second.total});
  }
  const auto& all = err["all"];
  res.errors.push_back({"all", all.first.n, all.first.abs / all.first.total, all.second.abs / all.second.total});
  for (const KindError& e : res.errors)
    report += fmt::format("  {:<12} {:>5} ops  {:6.1f}% -> {:6.1f}%\n", e.kind, e.ops, 100 * e.before, 100 * e.after);
  p.source = "calibrated by domino-profile --calibrate on " + trace.path + " from " +
             (base.path.empty() ? base.name : base.path);
  p.notes = (base.notes.empty() ? "" : base.notes + "; ") + "calibration: " + report;
  res.profile = p;
  res.report = report;
  return res;
}

}  // namespace domino::prof
