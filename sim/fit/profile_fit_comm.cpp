// profile_fit_comm.cpp: the communication terms of fit_profile (see profile_fit_terms.hpp): each collective
// kind's latency and bus bandwidth per measured algorithm (least squares on time = latency + ring traffic /
// busbw, exactly what CostModel::collective_cost computes: AllReduce 2(n-1)/n of the message, AllGather and
// ReduceScatter (n-1)/n of the gathered buffer) plus its table, the ranks' arrival skew, the interference
// slowdowns.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "sim/base/error.hpp"
#include "sim/fit/profile_fit_terms.hpp"
#include "sim/ir/schedule.hpp"

namespace domino::prof::fitting {

namespace {

// A rank's measurements of one collective kind (the executor's probes, rank_measure.hpp): under the kind's key
// ("collectives" for the AllReduce, "allgather", "reducescatter") the ring or the library's one algorithm, under
// "<key>_by_algorithm".<name> every other algorithm domino-profile forced on CUDA. Each entry is {kind, bytes,
// samples_us}: kind to_string(OpKind) ("allreduce" when absent), bytes the message (the gathered buffer for an
// AllGather or ReduceScatter, as nccl-tests' "size"). nullptr when the rank has none.
std::string samples_key(OpKind kind) { return kind == OpKind::AllReduce ? "collectives" : to_string(kind); }

const nlohmann::json* collectives_of(const nlohmann::json& rank, OpKind kind, const std::string& algorithm) {
  const std::string key = samples_key(kind);
  if (algorithm == "ring") return rank.contains(key) ? &rank[key] : nullptr;
  const std::string by = key + "_by_algorithm";
  return rank.contains(by) && rank[by].contains(algorithm) ? &rank[by][algorithm] : nullptr;
}

bool entry_of_kind(const nlohmann::json& entry, OpKind kind) {
  return entry.value("kind", std::string(to_string(OpKind::AllReduce))) == to_string(kind);
}

// One kind's measurements by one algorithm, per repeat over the ranks. After a barrier alone, the mean (a
// rank that left the barrier late sees a shorter transfer). After compute (an entry with compute_before_us),
// the shortest: the last rank to finish its compute finds the others waiting, so its time is the transfer
// alone, and theirs add their wait for it, which the simulator charges as the arrival skew (sync_us). Ranks
// list the same entries in the same order.
std::vector<std::pair<double, Timing>> merge_collectives(const FitInput& in, const std::string& algorithm, OpKind kind) {
  std::vector<std::pair<double, Timing>> out;
  const nlohmann::json* first = collectives_of(in.ranks.at(0), kind, algorithm);
  if (!first) return out;
  for (size_t i = 0; i < first->size(); ++i) {
    if (!entry_of_kind((*first)[i], kind)) continue;
    const bool after_compute = (*first)[i].contains("compute_before_us");
    std::vector<double> merged = samples((*first)[i].at("samples_us"));
    for (size_t r = 1; r < in.ranks.size(); ++r) {
      const nlohmann::json* other = collectives_of(in.ranks[r], kind, algorithm);
      if (!other) throw_runtime("profiler: rank " + std::to_string(r) + " has no " + to_string(kind) + " samples");
      const auto s = samples(other->at(i).at("samples_us"));
      for (size_t k = 0; k < merged.size() && k < s.size(); ++k)
        merged[k] = after_compute ? std::min(merged[k], s[k]) : merged[k] + s[k];
    }
    if (!after_compute)
      for (double& v : merged) v /= double(in.ranks.size());
    out.push_back({(*first)[i].at("bytes").get<double>(), timing_of(merged)});
  }
  return out;
}

std::vector<double> pooled(const FitInput& in, const char* key) {
  std::vector<double> all;
  for (const auto& r : in.ranks) {
    if (!r.contains("interference") || !r["interference"].contains(key)) continue;
    const auto s = samples(r["interference"].at(key));
    all.insert(all.end(), s.begin(), s.end());
  }
  return all;
}

// GEMMs that ran across an edge of the AllReduces' window: [duration, us inside the window] each.
using GemmsAcross = std::vector<std::pair<double, double>>;

// The GEMMs across the window, pooled over the ranks.
GemmsAcross pooled_across(const FitInput& in) {
  GemmsAcross all;
  for (const auto& r : in.ranks) {
    if (!r.contains("interference") || !r["interference"].contains("gemm_across_us")) continue;
    for (const auto& g : r["interference"]["gemm_across_us"])
      all.emplace_back(g.at(0).get<double>(), g.at(1).get<double>());
  }
  return all;
}

// Least squares on relative error; when noise hides the bandwidth (small messages only, or a loaded
// machine): latency from the fastest message, bandwidth from the largest.
LineFit fit_latency_bandwidth(const std::vector<double>& x, const std::vector<double>& y, std::string& notes) {
  LineFit f = fit_line(x, y, relative_weights(y));
  if (!f.ok || f.a < 0) f = fit_slope(x, y, relative_weights(y), 0);
  if (!f.ok || !(f.b > 0)) {
    const double min_t = *std::min_element(y.begin(), y.end());
    f.a = 0.98 * min_t;
    f.b = std::max(y.back() - f.a, 0.02 * y.back()) / x.back();
    f.ok = true;
    notes += "; AllReduce bandwidth not resolved by least squares (noisy): taken from the largest message";
  }
  return f;
}

// Per repeat, the last rank's arrival at the AllReduce after the same GEMMs minus the median rank's (wait_for_last).
std::vector<double> arrival_skews(const FitInput& in) {
  size_t reps = SIZE_MAX;
  for (const auto& r : in.ranks) reps = std::min(reps, r.at("sync").at("allreduce_us").size());
  std::vector<double> skew;
  for (size_t k = 0; k < reps; ++k) {
    // The AllReduces end together, so a rank's arrival is the end minus its AllReduce's time.
    std::vector<double> arrivals;
    for (const auto& r : in.ranks) arrivals.push_back(-r.at("sync").at("allreduce_us")[k].get<double>());
    skew.push_back(wait_for_last(std::move(arrivals)));
  }
  return skew;
}

// Messages that took over kOutOfOrder times as long as a bigger one: a bigger message is never cheaper to
// move, so either their probes were disturbed (on a virtual machine most often a halted CPU woken for each
// message) or the transport stalls at that size (Gloo's ReduceScatter of 8 or 96 KiB between pinned ranks,
// reproducibly: docs/fidelity.md). The table keeps every point as measured; the summary counts them and names
// the worst, so that a profile predicting small collectives slower than big ones is not taken on trust.
constexpr double kOutOfOrder = 1.5;

std::string out_of_order_messages(std::vector<std::pair<double, Timing>> coll, const std::string& name) {
  std::sort(coll.begin(), coll.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  int count = 0;
  double worst = 0;
  std::string example;
  size_t fastest_bigger = coll.size();  // index of the fastest message bigger than the one at hand
  for (size_t i = coll.size(); i-- > 0;) {
    const double t = coll[i].second.median_us;
    if (fastest_bigger < coll.size()) {
      const auto& [big_bytes, big] = coll[fastest_bigger];
      const double ratio = t / std::max(big.median_us, 1e-9);
      if (big_bytes > coll[i].first && ratio > kOutOfOrder) {
        ++count;
        if (ratio > worst) {
          worst = ratio;
          example = fmt::format("{} B took {:.0f} us, {} B {:.0f} us", int64_t(coll[i].first), t,
                                int64_t(big_bytes), big.median_us);
        }
      }
    }
    if (fastest_bigger == coll.size() || t < coll[fastest_bigger].second.median_us) fastest_bigger = i;
  }
  if (count == 0) return "";
  return fmt::format(
      "{}: {} of {} message sizes took over {}x as long as a bigger message ({}): their probes were "
      "disturbed or the transport stalled at that size, and the profile keeps those times (measure again to "
      "tell; with --cpu-placement none on a virtual machine a halted CPU wakes for each message)\n",
      name, count, coll.size(), kOutOfOrder, example);
}

// One algorithm's curve of one kind: time = latency + ring traffic / busbw (CostModel::collective_cost), and the
// table of every measured size. `label` names it in spreads and the summary ("" for the AllReduce ring of a
// one-curve profile).
CollectiveCurve fit_curve(const std::vector<std::pair<double, Timing>>& coll, const FitInput& in, OpKind kind,
                          const std::string& label, FitOutput out) {
  const std::string name = kind == OpKind::AllReduce ? "AllReduce" : kind == OpKind::AllGather ? "AllGather"
                                                                                                : "ReduceScatter";
  const std::string key = label.empty() ? to_string(kind) : std::string(to_string(kind)) + " " + label;
  std::vector<double> x, y, sp;
  // Ring traffic per byte of the message (CostModel's ring_traffic). A group of one moves nothing: its time is
  // all latency, and the message as x keeps the fit defined.
  const double per_byte = in.tp <= 1                   ? 1.0
                          : kind == OpKind::AllReduce ? 2.0 * (in.tp - 1) / in.tp
                                                      : double(in.tp - 1) / in.tp;
  for (const auto& [bytes, t] : coll) {
    x.push_back(bytes * per_byte);
    y.push_back(t.median_us);
    sp.push_back(t.spread());
    out.p.metadata.spread[fmt::format("{} {}", key, int64_t(bytes))] = t.spread();
  }
  const LineFit f = fit_latency_bandwidth(x, y, out.notes);
  // The table must reproduce every point with the same latency: keep it below the fastest message.
  const double min_t = *std::min_element(y.begin(), y.end());
  CollectiveCurve c;
  c.latency_us = std::min(f.a, 0.98 * min_t);
  c.bus_bandwidth_gbps = 1.0 / f.b / 1e3;
  for (size_t i = 0; i < x.size(); ++i) c.table.push_back({coll[i].first, x[i] / (y[i] - c.latency_us) / 1e3});
  out.p.metadata.spread[key] = median_of(sp);
  if (c.latency_us < f.a)
    out.notes += fmt::format("; {}{} least-squares latency {:.3g} us (stored {:.3g} us so the table "
                             "reproduces the fastest message)", name, label.empty() ? "" : " " + label, f.a, c.latency_us);
  out.summary += fmt::format("{}{} ({} sizes, {} ranks): latency {:.3g} us, bus bandwidth {:.3g} GB/s\n", name,
                             label.empty() ? "" : " " + label, x.size(), in.tp, f.a, c.bus_bandwidth_gbps);
  out.summary += out_of_order_messages(coll, name + (label.empty() ? "" : " " + label));
  return c;
}

// One kind's curves: the ring (or the library's one algorithm) and every other measured algorithm (NVLS on
// CUDA) beside it; nullopt when fewer than two sizes of the kind were measured. Where several algorithms were
// measured the ring's figures are labelled "ring".
std::optional<AlgorithmCurves> fit_kind(const FitInput& in, OpKind kind, FitOutput out) {
  const auto coll = merge_collectives(in, "ring", kind);
  if (coll.size() < 2) return std::nullopt;
  const auto nvls = merge_collectives(in, "nvls", kind);
  const bool several = in.ranks[0].contains(samples_key(kind) + "_by_algorithm");
  AlgorithmCurves k{fit_curve(coll, in, kind, several ? "ring" : "", out)};
  if (nvls.size() < 2) return k;
  k.nvls = fit_curve(nvls, in, kind, "nvls", out);
  k.nvls->min_ranks = kDefaultNvlsMinRanks;  // measured on in.tp ranks; NCCL's floor below that
  return k;
}

}  // namespace

// The AllReduce into intra_node's own curves; the AllGather and ReduceScatter, where measured, into
// intra_node.allgather and reduce_scatter (unmeasured: absent, and sequence-parallel plans cannot be costed).
void fit_collectives(const FitInput& in, FitOutput out) {
  Profile& p = out.p;
  const auto allreduce = fit_kind(in, OpKind::AllReduce, out);
  if (!allreduce) {
    p.intra_node.latency_us = 0;
    p.intra_node.bus_bandwidth_gbps = 1e6;  // a group of one never communicates
    out.notes += "; one rank: no collective measured";
    return;
  }
  p.intra_node.latency_us = allreduce->ring.latency_us;
  p.intra_node.bus_bandwidth_gbps = allreduce->ring.bus_bandwidth_gbps;
  p.intra_node.table = allreduce->ring.table;
  p.intra_node.nvls = allreduce->nvls;
  p.intra_node.allgather = fit_kind(in, OpKind::AllGather, out);
  p.intra_node.reduce_scatter = fit_kind(in, OpKind::ReduceScatter, out);
}

// Per repeat, how much later than the median rank the last one reached the AllReduce after the same GEMMs
// (wait_for_last); the median is sync_us.
void fit_arrival_skew(const FitInput& in, FitOutput out) {
  const auto has_sync = [](const auto& r) { return r.contains("sync"); };
  if (in.ranks.size() <= 1 || !std::all_of(in.ranks.begin(), in.ranks.end(), has_sync)) return;
  const std::vector<double> skew = arrival_skews(in);
  if (skew.empty()) return;
  out.p.intra_node.sync_us = median_of(skew);
  out.p.metadata.spread["allreduce arrival skew"] = timing_of(skew).spread();
  out.summary += fmt::format("arrival skew at an AllReduce after {:.0f} ms of GEMMs: the last rank {:.3g} us after the "
                             "median one (median of {} repeats)\n",
                             in.ranks[0].at("sync").at("stretch_us").get<double>() / 1e3, out.p.intra_node.sync_us,
                             skew.size());
}

// Fewer GEMMs after the AllReduces than this, and the GEMM's own repeats are the baseline.
constexpr size_t kMinGemmsAfter = 3;

namespace {

// The largest share of the core the collectives may be found to take from compute: 0.95 is a compute rate
// of 1/20 beside communication, which the simulator runs as the two taking turns.
constexpr double kMaxCoreShareTaken = 0.95;

// Compute's slowdown beside communication from GEMMs that ran across the window's edges: one that runs at
// rate r for the `inside` us it spends in the window takes inside * (1 - r) longer than the baseline, so
// the share the window took, 1 - r, is the pooled excess over the pooled time inside.
double slowdown_across(const GemmsAcross& across, double baseline_us) {
  double excess = 0, inside = 0;
  for (const auto& [duration, in_window] : across) {
    excess += std::max(0.0, duration - baseline_us);
    inside += in_window;
  }
  const double taken = inside > 0 ? std::min(excess / inside, kMaxCoreShareTaken) : 0;
  return taken / (1 - taken);
}

}  // namespace

// The slowdown of each stream while the other runs. A GEMM beside the AllReduces is compared with the GEMMs
// of the same passes after they ended where there are enough of them (the same run's state), else with the
// GEMM's own back-to-back repeats; where no GEMM ran wholly inside the window, the GEMMs across its edges
// tell how much of the core it took (slowdown_across). The AllReduce's slowdown is its mean beside the GEMMs
// over its mean alone: on a CPU its thread either shares the core with the compute thread or waits for it,
// its times beside compute fall in two groups, and their median jumps between them from one run to the next
// (0 % and 436 % in two loopback profiles an hour apart on one machine); the mean is what a collective beside
// compute costs on average, as the simulator charges it.
void fit_interference(const FitInput& in, FitOutput out) {
  const std::vector<double> after = pooled(in, "gemm_after_us");
  const std::vector<double> ga = after.size() >= kMinGemmsAfter ? after : pooled(in, "gemm_alone_us");
  const std::vector<double> gd = pooled(in, "gemm_during_us");
  const GemmsAcross across = gd.empty() ? pooled_across(in) : GemmsAcross{};
  const std::vector<double> aa = pooled(in, "allreduce_alone_us"), ad = pooled(in, "allreduce_during_us");
  if (ga.empty() || (gd.empty() && across.empty()) || aa.empty() || ad.empty()) {
    out.notes += "; interference not measured (one rank, or no GEMM ran beside the AllReduces)";
    return;
  }
  InterferenceProfile& i = out.p.interference;
  i.compute_slowdown_during_comm =
      gd.empty() ? slowdown_across(across, median_of(ga)) : std::max(0.0, median_of(gd) / median_of(ga) - 1);
  i.comm_slowdown_during_compute = std::max(0.0, mean_of(ad) / mean_of(aa) - 1);
  if (!gd.empty()) out.p.metadata.spread["interference.gemm_during_comm"] = timing_of(gd).spread();
  out.p.metadata.spread["interference.allreduce_during_gemm"] = timing_of(ad).spread();
  const std::string gemms =
      gd.empty() ? fmt::format("{} GEMMs across the window's edges, none inside", across.size())
                 : fmt::format("{} GEMMs", gd.size());
  out.summary += fmt::format(
      "interference: GEMM {:.0f}% slower during an AllReduce ({}), AllReduce {:.0f}% "
      "slower during a GEMM ({} AllReduces)\n",
      100 * i.compute_slowdown_during_comm, gemms, 100 * i.comm_slowdown_during_compute, ad.size());
  if (gd.empty()) out.notes += "; compute beside communication from the GEMMs across the AllReduces' window";
}

}  // namespace domino::prof::fitting
