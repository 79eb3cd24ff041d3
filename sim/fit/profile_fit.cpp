// profile_fit.cpp: from raw samples to the profile's figures (see profile_fit.hpp): the compute points
// merged over the ranks, one fit per cost term in a fixed order (profile_fit_compute.cpp,
// profile_fit_comm.cpp), then the self-check of the fitted parameters against the measured tables.
#include "sim/fit/profile_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sim/base/error.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/fit/profile_fit_terms.hpp"

namespace domino::prof {

namespace fitting {

std::vector<double> samples(const nlohmann::json& j) { return j.get<std::vector<double>>(); }

double p90(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[size_t(0.9 * double(v.size() - 1))];
}

}  // namespace fitting

namespace {

using fitting::Point;
using fitting::samples;

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

std::string measured_by(const FitInput& in) {
  return fmt::format("measured by domino-profile {} ({} backend, {} rank{}{})", DOMINO_VERSION, in.backend, in.tp,
                     in.tp == 1 ? "" : "s",
                     in.link_gbps > 0 ? fmt::format(", emulated {} Gbit/s link", in.link_gbps) : ", no link emulation");
}

// Records the self-check in the profile's spreads and the summary.
void record_fit_quality(const SelfCheck& sc, Profile& p, std::string& summary) {
  p.metadata.spread["fit.gemm_curve"] = fitting::p90(sc.gemm);
  p.metadata.spread["fit.allreduce"] = fitting::p90(sc.allreduce);
  summary += fmt::format("fit quality (p90 relative residual of the fitted parameters alone vs the measured points): "
                         "GEMM curve {:.0f}%, AllReduce latency+bandwidth {:.0f}%\n",
                         100 * fitting::p90(sc.gemm), 100 * fitting::p90(sc.allreduce));
}

}  // namespace

SelfCheck self_check(const Profile& p, int tp) {
  SelfCheck out;
  Profile measured_only = p;  // the points were measured without arrival skew
  measured_only.intra_node.sync_us = 0;
  measured_only.intra_node.nvls.reset();  // the ring's table is checked against the ring's curve alone
  Profile curves = measured_only;
  for (auto& g : curves.gemm)
    if (g) g->table.clear();
  curves.intra_node.table.clear();
  const CostModel fitted(curves), full(measured_only);
  for (int d = 0; d < kNumDTypes; ++d) {
    if (!p.gemm[d]) continue;
    for (const GemmTiming& r : p.gemm[d]->table) {
      if (r.blocks > 1) continue;  // a whole op of several products: the curve times one
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
  using namespace fitting;
  if (in.ranks.empty()) throw_runtime("profiler: no measurements to fit");
  FitResult res;
  Profile& p = res.profile;
  p.name = in.name;
  p.source = measured_by(in);
  p.devices_per_node = std::max(in.tp, 4);
  p.metadata = in.metadata;
  std::string notes = in.workload_note;
  const FitOutput out{p, res.summary, notes};

  const std::vector<Point> compute = merge_compute(in);
  fit_memory_general(compute, out);
  fit_memory_per_kind(compute, out);
  const double peak = fit_gemm(in, compute, out);
  fit_attention(compute, peak, out);
  fit_collectives(in, out);
  fit_arrival_skew(in, out);
  fit_interference(in, out);
  fit_attention_per_code(compute, out);

  p.notes = notes + "; load average at the end " + in.load_average_at_end;
  validate_profile(p);
  record_fit_quality(self_check(p, in.tp), p, res.summary);
  return res;
}

}  // namespace domino::prof
