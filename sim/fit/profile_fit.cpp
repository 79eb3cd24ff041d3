// profile_fit.cpp: from raw samples to the profile's figures (see profile_fit.hpp).
#include "sim/fit/profile_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>

#include "sim/fit/stats.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/base/error.hpp"

namespace domino::prof {

namespace {

struct Point {
  nlohmann::json entry;
  Timing t;
};

std::vector<double> samples(const nlohmann::json& j) { return j.get<std::vector<double>>(); }

// Compute entries of every rank, samples pooled per probe (ranks ran the same list in the same order).
std::vector<Point> merge_compute(const FitInput& in) {
  std::vector<Point> out;
  if (!in.compute.is_null()) {
    for (const auto& e : in.compute) out.push_back({e, timing_of(samples(e.at("samples_us")))});
    return out;
  }
  const auto& first = in.ranks.at(0).at("compute");
  for (size_t i = 0; i < first.size(); ++i) {
    std::vector<double> all;
    for (const auto& r : in.ranks) {
      const auto s = samples(r.at("compute").at(i).at("samples_us"));
      all.insert(all.end(), s.begin(), s.end());
    }
    out.push_back({first[i], timing_of(all)});
  }
  return out;
}

// AllReduce: per repeat the mean over ranks (a rank that left the barrier late sees a shorter transfer).
std::vector<std::pair<double, Timing>> merge_collectives(const FitInput& in) {
  std::vector<std::pair<double, Timing>> out;
  if (!in.ranks.at(0).contains("collectives")) return out;
  const auto& first = in.ranks[0]["collectives"];
  for (size_t i = 0; i < first.size(); ++i) {
    std::vector<double> mean = samples(first[i].at("samples_us"));
    for (size_t r = 1; r < in.ranks.size(); ++r) {
      const auto s = samples(in.ranks[r].at("collectives").at(i).at("samples_us"));
      for (size_t k = 0; k < mean.size() && k < s.size(); ++k) mean[k] += s[k];
    }
    for (double& v : mean) v /= double(in.ranks.size());
    out.push_back({first[i].at("bytes").get<double>(), timing_of(mean)});
  }
  return out;
}

std::vector<double> pooled(const FitInput& in, const char* key) {
  std::vector<double> all;
  for (const auto& r : in.ranks) {
    if (!r.contains("interference")) continue;
    const auto s = samples(r["interference"].at(key));
    all.insert(all.end(), s.begin(), s.end());
  }
  return all;
}

bool is_memory_kind(const std::string& k) {
  const auto& kinds = memory_bound_kinds();
  return std::find(kinds.begin(), kinds.end(), k) != kinds.end();
}

std::vector<EfficiencyPoint> efficiency_curve(const std::vector<double>& flops, const std::vector<double>& eff) {
  std::vector<double> gflop;
  for (double f : flops) gflop.push_back(f / 1e9);
  std::vector<EfficiencyPoint> curve;
  for (const CurvePoint& c : log_binned_median(gflop, eff, 0.25))
    curve.push_back({c.x, std::clamp(c.y, 1e-4, 1.0)});
  return curve;
}

double p90(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[size_t(0.9 * double(v.size() - 1))];
}

// Time the compute part takes once the fixed cost is paid (never below half the measured time: the fixed
// cost is fitted on memory-bound ops and is only an estimate for GEMMs).
double compute_part(double t, double launch) { return std::max(t - launch, 0.5 * t); }

}  // namespace

SelfCheck self_check(const Profile& p, int tp) {
  SelfCheck out;
  Profile measured_only = p;  // the points were measured without arrival skew
  measured_only.intra_node.sync_us = 0;
  Profile curves = measured_only;
  for (auto& g : curves.gemm)
    if (g) g->table.clear();
  curves.intra_node.table.clear();
  const CostModel fitted(curves), full(measured_only);
  for (int d = 0; d < kNumDTypes; ++d) {
    if (!p.gemm[d]) continue;
    for (const GemmTiming& r : p.gemm[d]->table) {
      const double flops = 2.0 * double(r.m) * double(r.n) * double(r.k);
      const double bytes = 4.0 * double(r.m * r.k + r.k * r.n + r.m * r.n);
      const double t = fitted.gemm_us(DType(d), r.m, r.n, r.k, flops, bytes);
      out.gemm.push_back(std::abs(t - r.time_us) / r.time_us);
    }
  }
  for (const BusBandwidthPoint& b : p.intra_node.table) {
    const double measured = full.allreduce_us(b.bytes, tp, p.devices_per_node);
    const double t = fitted.allreduce_us(b.bytes, tp, p.devices_per_node);
    out.allreduce.push_back(std::abs(t - measured) / measured);
  }
  return out;
}

FitResult fit_profile(const FitInput& in) {
  if (in.ranks.empty()) throw_runtime("profiler: no measurements to fit");
  FitResult res;
  Profile& p = res.profile;
  p.name = in.name;
  p.source = fmt::format("measured by domino-profile {} ({} backend, {} rank{}{})", DOMINO_VERSION, in.backend, in.tp,
                         in.tp == 1 ? "" : "s",
                         in.link_gbps > 0 ? fmt::format(", emulated {} Gbit/s link", in.link_gbps) : ", no link emulation");
  p.devices_per_node = std::max(in.tp, 4);
  p.metadata = in.metadata;
  std::string notes = in.workload_note;
  std::string& sum = res.summary;

  const std::vector<Point> compute = merge_compute(in);

  // --- memory-bound ops: time = launch + bytes / bandwidth, least squares on relative error ---
  std::vector<double> mx, my;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> per_kind;
  for (const Point& pt : compute) {
    const std::string kind = pt.entry.at("kind");
    if (!is_memory_kind(kind)) continue;
    const double bytes = pt.entry.at("bytes");
    mx.push_back(bytes);
    my.push_back(pt.t.median_us);
    per_kind[kind].first.push_back(bytes);
    per_kind[kind].second.push_back(pt.t.median_us);
    p.metadata.spread["memory " + pt.entry.at("label").get<std::string>()] = pt.t.spread();
  }
  // Weights 1/t: between absolute error (the big ops dominate an iteration) and relative error (small ops
  // are many). A single bandwidth cannot fit every kind: each kind also gets its own (memory.per_kind).
  std::vector<double> mw;
  for (double t : my) mw.push_back(1.0 / t);
  LineFit mem = fit_line(mx, my, mw);
  if (!mem.ok || mem.a < 0 || !(mem.b > 0)) mem = fit_slope(mx, my, mw, 0);  // noise: bandwidth only
  if (!mem.ok || !(mem.b > 0)) throw_runtime("profiler: the memory-bound ops gave no usable bandwidth fit");
  p.memory.launch_overhead_us = mem.a;
  p.memory.bandwidth_gbps = 1.0 / mem.b / 1e3;
  {
    std::vector<double> res_mem;
    for (size_t i = 0; i < mx.size(); ++i) res_mem.push_back(std::abs(mem.a + mem.b * mx[i] - my[i]) / my[i]);
    p.metadata.spread["fit.memory"] = p90(res_mem);
    sum += fmt::format("memory-bound ops ({} points): {:.3g} GB/s, {:.3g} us fixed cost; p90 residual {:.0f}%\n",
                       mx.size(), p.memory.bandwidth_gbps, p.memory.launch_overhead_us, 100 * p90(res_mem));
    std::string kinds;
    for (auto& [kind, xy] : per_kind) {
      LineFit f = fit_line(xy.first, xy.second, relative_weights(xy.second));
      if (!f.ok || f.a < 0 || !(f.b > 0)) f = fit_slope(xy.first, xy.second, relative_weights(xy.second), 0);
      if (!f.ok || !(f.b > 0)) continue;
      p.memory.per_kind[kind] = MemoryCost{1 / f.b / 1e3, f.a};
      kinds += fmt::format("{}{} {:.3g} GB/s + {:.3g} us", kinds.empty() ? "" : ", ", kind, 1 / f.b / 1e3, f.a);
    }
    sum += "  per kind: " + kinds + "\n";
  }
  const double launch = p.memory.launch_overhead_us;

  // --- GEMMs: measured table, peak = best throughput, efficiency curve over size ---
  GemmProfile g;
  std::vector<double> gflops, geff, gspread;
  double peak = 0;
  DType gemm_dtype = DType::FP32;  // the CPU backend computes in fp32; CUDA probes carry the model's dtype
  for (const Point& pt : compute) {
    if (pt.entry.at("kind") != "gemm") continue;
    if (in.backend != "cpu" && pt.entry.contains("dtype")) gemm_dtype = DType(pt.entry["dtype"].get<int>());
    peak = std::max(peak, pt.entry.at("flops").get<double>() / compute_part(pt.t.median_us, launch));
  }
  if (!(peak > 0)) throw_runtime("profiler: no GEMM was measured");
  for (const Point& pt : compute) {
    if (pt.entry.at("kind") != "gemm") continue;
    const double flops = pt.entry.at("flops");
    const int64_t m = pt.entry.at("m"), n = pt.entry.at("n"), k = pt.entry.at("k");
    g.table.push_back({m, n, k, pt.t.median_us});
    gflops.push_back(flops);
    geff.push_back(flops / (peak * compute_part(pt.t.median_us, launch)));
    gspread.push_back(pt.t.spread());
    p.metadata.spread[fmt::format("gemm {}x{}x{}", m, n, k)] = pt.t.spread();
  }
  std::sort(g.table.begin(), g.table.end(), [](const GemmTiming& a, const GemmTiming& b) {
    return std::tie(a.m, a.n, a.k) < std::tie(b.m, b.n, b.k);
  });
  g.peak_tflops = peak / 1e6;
  g.efficiency = efficiency_curve(gflops, geff);
  p.metadata.spread["gemm"] = median_of(gspread);
  p.gemm[static_cast<int>(gemm_dtype)] = g;
  sum += fmt::format("GEMM ({} shapes): peak {:.4g} GFLOP/s, efficiency {:.2f} .. {:.2f}\n", g.table.size(),
                     g.peak_tflops * 1e3, g.efficiency.front().efficiency, g.efficiency.back().efficiency);

  // --- attention: its own efficiency curve against the GEMM peak ---
  std::vector<double> aflops, aeff, aspread;
  for (const Point& pt : compute) {
    if (pt.entry.at("kind") != "attention") continue;
    const double flops = pt.entry.at("flops");
    aflops.push_back(flops);
    aeff.push_back(flops / (peak * compute_part(pt.t.median_us, launch)));
    aspread.push_back(pt.t.spread());
    p.metadata.spread[pt.entry.at("label").get<std::string>()] = pt.t.spread();
  }
  if (aflops.empty()) {
    p.attention.relative_efficiency = 0.5;
    notes += "; attention not measured (relative_efficiency 0.5 assumed)";
  } else {
    p.attention.efficiency = efficiency_curve(aflops, aeff);
    p.metadata.spread["attention"] = median_of(aspread);
    sum += fmt::format("attention ({} points): efficiency {:.2f} .. {:.2f} of the GEMM peak\n", aflops.size(),
                       p.attention.efficiency.front().efficiency, p.attention.efficiency.back().efficiency);
  }

  // --- AllReduce: time = latency + S * 2(n-1)/n / busbw (CostModel::allreduce_us) ---
  const auto coll = merge_collectives(in);
  const double ring = in.tp > 1 ? 2.0 * (in.tp - 1) / in.tp : 1.0;
  if (coll.size() >= 2) {
    std::vector<double> x, y, sp;
    for (const auto& [bytes, t] : coll) {
      x.push_back(bytes * ring);
      y.push_back(t.median_us);
      sp.push_back(t.spread());
      p.metadata.spread[fmt::format("allreduce {}", int64_t(bytes))] = t.spread();
    }
    LineFit f = fit_line(x, y, relative_weights(y));
    if (!f.ok || f.a < 0) f = fit_slope(x, y, relative_weights(y), 0);
    // The table must reproduce every point with the same latency: keep it below the fastest message.
    const double min_t = *std::min_element(y.begin(), y.end());
    if (!f.ok || !(f.b > 0)) {
      // Noise hid the bandwidth (small messages only, or a loaded machine): latency from the fastest
      // message, bandwidth from the largest.
      f.a = 0.98 * min_t;
      f.b = std::max(y.back() - f.a, 0.02 * y.back()) / x.back();
      f.ok = true;
      notes += "; AllReduce bandwidth not resolved by least squares (noisy): taken from the largest message";
    }
    p.intra_node.latency_us = std::min(f.a, 0.98 * min_t);
    p.intra_node.bus_bandwidth_gbps = 1.0 / f.b / 1e3;
    for (size_t i = 0; i < x.size(); ++i)
      p.intra_node.table.push_back({coll[i].first, x[i] / (y[i] - p.intra_node.latency_us) / 1e3});
    p.metadata.spread["allreduce"] = median_of(sp);
    if (p.intra_node.latency_us < f.a)
      notes += fmt::format("; AllReduce least-squares latency {:.3g} us (stored {:.3g} us so the table reproduces "
                           "the fastest message)", f.a, p.intra_node.latency_us);
    sum += fmt::format("AllReduce ({} sizes, {} ranks): latency {:.3g} us, bus bandwidth {:.3g} GB/s\n", x.size(),
                       in.tp, f.a, p.intra_node.bus_bandwidth_gbps);
  } else {
    p.intra_node.latency_us = 0;
    p.intra_node.bus_bandwidth_gbps = 1e6;  // a group of one never communicates
    notes += "; one rank: no collective measured";
  }

  // --- arrival skew: per repeat, the spread of the ranks' AllReduce times after the same GEMMs ---
  if (in.ranks.size() > 1 && std::all_of(in.ranks.begin(), in.ranks.end(), [](const auto& r) { return r.contains("sync"); })) {
    size_t reps = SIZE_MAX;
    for (const auto& r : in.ranks) reps = std::min(reps, r.at("sync").at("allreduce_us").size());
    std::vector<double> skew;
    for (size_t k = 0; k < reps; ++k) {
      double lo = 1e300, hi = 0;
      for (const auto& r : in.ranks) {
        const double t = r.at("sync").at("allreduce_us")[k].get<double>();
        lo = std::min(lo, t), hi = std::max(hi, t);
      }
      skew.push_back(hi - lo);
    }
    if (!skew.empty()) {
      p.intra_node.sync_us = median_of(skew);
      p.metadata.spread["allreduce arrival skew"] = timing_of(skew).spread();
      sum += fmt::format("arrival skew at an AllReduce after {:.0f} ms of GEMMs: {:.3g} us (median of {} repeats)\n",
                         in.ranks[0].at("sync").at("stretch_us").get<double>() / 1e3, p.intra_node.sync_us, skew.size());
    }
  }

  // --- interference: slowdown of each stream while the other runs ---
  const std::vector<double> ga = pooled(in, "gemm_alone_us"), gd = pooled(in, "gemm_during_us");
  const std::vector<double> aa = pooled(in, "allreduce_alone_us"), ad = pooled(in, "allreduce_during_us");
  if (!ga.empty() && !gd.empty() && !aa.empty() && !ad.empty()) {
    p.interference.compute_slowdown_during_comm = std::max(0.0, median_of(gd) / median_of(ga) - 1);
    p.interference.comm_slowdown_during_compute = std::max(0.0, median_of(ad) / median_of(aa) - 1);
    p.metadata.spread["interference.gemm_during_comm"] = timing_of(gd).spread();
    p.metadata.spread["interference.allreduce_during_gemm"] = timing_of(ad).spread();
    sum += fmt::format("interference: GEMM {:.0f}% slower during an AllReduce ({} GEMMs), AllReduce {:.0f}% slower "
                       "during a GEMM ({} AllReduces)\n",
                       100 * p.interference.compute_slowdown_during_comm, gd.size(),
                       100 * p.interference.comm_slowdown_during_compute, ad.size());
  } else {
    notes += "; interference not measured (one rank, or no GEMM fell inside the AllReduce window)";
  }

  p.notes = notes + "; load average at the end " + in.load_average_at_end;
  validate_profile(p);
  const SelfCheck sc = self_check(p, in.tp);
  p.metadata.spread["fit.gemm_curve"] = p90(sc.gemm);
  p.metadata.spread["fit.allreduce"] = p90(sc.allreduce);
  sum += fmt::format("fit quality (p90 relative residual of the fitted parameters alone vs the measured points): "
                     "GEMM curve {:.0f}%, AllReduce latency+bandwidth {:.0f}%\n",
                     100 * p90(sc.gemm), 100 * p90(sc.allreduce));
  return res;
}

}  // namespace domino::prof
