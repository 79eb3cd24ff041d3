// profile_collectives.cpp: a profile's collective levels (collectives.intra_node, inter_node): reading
// either form (one ring curve, or per-algorithm curves with their SM counts and a pin) of the AllReduce and
// of the optional allgather and reduce_scatter curves beside it, and the checks validate_profile applies to
// levels built in code (docs/profile-format.md).
#include <array>
#include <string>

#include "sim/cost/profile.hpp"
#include "sim/cost/profile_checks.hpp"

namespace domino {

namespace {

constexpr std::array<const char*, kNumCollectiveAlgorithms> kAlgorithmNames = {"ring", "nvls"};
constexpr int kMaxSms = 1 << 12;  // far above any GPU's SM count: a larger figure is a typo

}  // namespace

const char* collective_algorithm_name(CollectiveAlgorithm a) { return kAlgorithmNames[static_cast<int>(a)]; }

std::optional<CollectiveAlgorithm> collective_algorithm_from_name(const std::string& name) {
  for (int a = 0; a < kNumCollectiveAlgorithms; ++a)
    if (name == kAlgorithmNames[a]) return static_cast<CollectiveAlgorithm>(a);
  return std::nullopt;
}

namespace profile_io {

namespace {

const std::vector<std::string> kCurveKeys = {"latency_us", "bus_bandwidth_gbps", "table"};
const std::string kAllGatherKey = "allgather";
const std::string kReduceScatterKey = "reduce_scatter";

// With nvls pinned, what has no NVLS curve ("" when nothing): NCCL_ALGO=nvls would leave it no algorithm.
std::string lacks_pinned(const CollectiveProfile& c) {
  if (c.pinned != CollectiveAlgorithm::Nvls) return "";
  if (!c.nvls) return "the level has no algorithms.nvls curve";
  std::vector<std::string> lacking;
  if (c.allgather && !c.allgather->nvls) lacking.push_back(kAllGatherKey);
  if (c.reduce_scatter && !c.reduce_scatter->nvls) lacking.push_back(kReduceScatterKey);
  if (lacking.empty()) return "";
  return lacking.size() == 1 ? lacking[0] + " has no algorithms.nvls curve"
                             : lacking[0] + " and " + lacking[1] + " have no algorithms.nvls curve";
}

std::vector<std::string> algorithm_names() { return {kAlgorithmNames.begin(), kAlgorithmNames.end()}; }

// latency_us, bus_bandwidth_gbps and the optional table, from a map that holds them (a level in the
// single-curve form, or one algorithm's map).
CollectiveCurve read_curve_figures(YamlMap& m, const std::string& ctx) {
  CollectiveCurve c;
  c.latency_us = non_negative(m, "latency_us");
  c.bus_bandwidth_gbps = positive(m, "bus_bandwidth_gbps");
  if (auto t = m.opt_node("table")) {
    std::vector<SourceLoc> locs;
    for (const auto& r : read_rows(m.file(), *t, ctx + ".table", 2, "[bytes, bus_bandwidth_gbps]", locs)) {
      c.table.push_back({r[0], r[1]});
    }
    check_bus_table(c.table, ctx + ".table", locs);
  }
  return c;
}

// One entry of `algorithms`: its curve, its SMs, and (nvls) the fewest ranks it runs on.
CollectiveCurve read_algorithm(const std::string& file, const YAML::Node& node, const std::string& ctx,
                               CollectiveAlgorithm a) {
  YamlMap m(node, file, ctx);
  std::vector<std::string> keys = kCurveKeys;
  keys.push_back("sms");
  if (a == CollectiveAlgorithm::Nvls) keys.push_back("min_ranks");
  m.finish(keys);
  CollectiveCurve c = read_curve_figures(m, ctx);
  if (m.has("sms")) c.sms = count_in(m, "sms", 0, kMaxSms);
  if (a == CollectiveAlgorithm::Nvls)
    c.min_ranks = m.has("min_ranks") ? count_in(m, "min_ranks", 2, kMaxSms) : kDefaultNvlsMinRanks;
  return c;
}

// Checks a map's keys: `sms` beside one ring curve gets its own message (SMs are stated per algorithm), any
// other unknown key the closest valid one.
void finish_curves_map(YamlMap& m, const std::vector<std::string>& keys, const std::string& whose) {
  if (m.has("sms") && !m.has("algorithms"))
    m.fail("sms", "SMs are stated per algorithm: give " + whose + " curves under algorithms (algorithms.ring.sms)");
  m.finish(keys);
}

// `algorithms`: ring (required) and the others, into one kind's curves.
AlgorithmCurves read_algorithms(const std::string& file, const YAML::Node& node, const std::string& ctx,
                                bool intra_node) {
  YamlMap m(node, file, ctx);
  m.finish(algorithm_names());  // an unknown name, with the closest suggested
  if (!m.has("ring")) {
    throw_bad_input(m.where(), ctx + ": needs ring (NCCL falls back to ring wherever no other algorithm runs)");
  }
  AlgorithmCurves c{read_algorithm(file, m.get_node("ring"), ctx + ".ring", CollectiveAlgorithm::Ring)};
  if (!m.has("nvls")) return c;
  if (!intra_node) m.fail("nvls", "NVLS (NVLink SHARP) runs inside one NVLink domain only, not across nodes");
  c.nvls = read_algorithm(file, m.get_node("nvls"), ctx + ".nvls", CollectiveAlgorithm::Nvls);
  return c;
}

// One kind's curves from a map that holds them in either form: one ring curve (latency_us,
// bus_bandwidth_gbps, table) or `algorithms`. The caller has checked the map's keys.
AlgorithmCurves read_kind_curves(YamlMap& m, const std::string& file, const std::string& ctx, bool intra_node) {
  if (auto algorithms = m.opt_node("algorithms")) {
    for (const std::string& key : kCurveKeys)
      if (m.has(key)) m.fail(key, "with algorithms, the ring's figures go under algorithms.ring");
    return read_algorithms(file, *algorithms, ctx + ".algorithms", intra_node);
  }
  return AlgorithmCurves{read_curve_figures(m, ctx)};
}

// allgather or reduce_scatter of a level: its own map in either form.
AlgorithmCurves read_gather_kind(const std::string& file, const YAML::Node& node, const std::string& ctx,
                                 bool intra_node) {
  YamlMap m(node, file, ctx);
  std::vector<std::string> keys = kCurveKeys;
  keys.push_back("algorithms");
  finish_curves_map(m, keys, "its");
  return read_kind_curves(m, file, ctx, intra_node);
}

// One kind's curves (ctx names them; `algorithms_form`: as the profile writes them).
void check_kind_curves(const SourceLoc& at, const AlgorithmCurves& k, const std::string& ctx, bool algorithms_form,
                       bool intra_node) {
  const auto check_curve = [&](const CollectiveCurve& curve, const std::string& what) {
    require_non_negative(at, what + ".latency_us", curve.latency_us);
    require_positive(at, what + ".bus_bandwidth_gbps", curve.bus_bandwidth_gbps);
    check_bus_table(curve.table, what + ".table", {at});
    if (curve.sms < 0 || curve.sms > kMaxSms) throw_bad_input(at, what + ".sms must be a count in [0, " + std::to_string(kMaxSms) + "]");
  };
  check_curve(k.ring, algorithms_form ? ctx + ".algorithms.ring" : ctx);
  if (!k.nvls) return;
  if (!intra_node) throw_bad_input(at, ctx + ": NVLS runs inside one NVLink domain only, not across nodes");
  check_curve(*k.nvls, ctx + ".algorithms.nvls");
  if (k.nvls->min_ranks < 2) throw_bad_input(at, ctx + ".algorithms.nvls.min_ranks must be a count from 2");
}

}  // namespace

CollectiveProfile read_collective(const std::string& file, const YAML::Node& node, const std::string& ctx,
                                  bool intra_node) {
  YamlMap m(node, file, ctx);
  std::vector<std::string> keys = kCurveKeys;
  keys.insert(keys.end(), {"sync_us", "sync_per_compute", "algorithm", "algorithms", kAllGatherKey, kReduceScatterKey});
  finish_curves_map(m, keys, "the level's");
  CollectiveProfile c;
  const AlgorithmCurves allreduce = read_kind_curves(m, file, ctx, intra_node);
  c.latency_us = allreduce.ring.latency_us;
  c.bus_bandwidth_gbps = allreduce.ring.bus_bandwidth_gbps;
  c.table = allreduce.ring.table;
  c.ring_sms = allreduce.ring.sms;
  c.nvls = allreduce.nvls;
  if (m.has("sync_us")) c.sync_us = non_negative(m, "sync_us");
  if (m.has("sync_per_compute")) {
    c.sync_per_compute = non_negative(m, "sync_per_compute");
    if (c.sync_per_compute > 1)
      m.fail("sync_per_compute", "must be at most 1: the ranks cannot drift apart by more than the compute between");
  }
  if (auto n = m.opt_node(kAllGatherKey)) c.allgather = read_gather_kind(file, *n, ctx + "." + kAllGatherKey, intra_node);
  if (auto n = m.opt_node(kReduceScatterKey))
    c.reduce_scatter = read_gather_kind(file, *n, ctx + "." + kReduceScatterKey, intra_node);
  if (auto pin = m.opt_enum("algorithm", algorithm_names())) {
    c.pinned = collective_algorithm_from_name(*pin);
    if (const std::string lacking = lacks_pinned(c); !lacking.empty()) m.fail("algorithm", "pins nvls, but " + lacking);
  }
  return c;
}

void check_collective(const SourceLoc& at, const CollectiveProfile& c, const std::string& ctx, bool intra_node) {
  require_non_negative(at, ctx + ".sync_us", c.sync_us);
  if (!(c.sync_per_compute >= 0 && c.sync_per_compute <= 1))
    throw_bad_input(at, ctx + ".sync_per_compute must be in [0, 1] (microseconds of skew per microsecond of compute)");
  check_kind_curves(at, {c.ring(), c.nvls}, ctx, c.has_algorithm_figures(), intra_node);
  if (c.allgather)
    check_kind_curves(at, *c.allgather, ctx + "." + kAllGatherKey, c.allgather->has_algorithm_figures(), intra_node);
  if (c.reduce_scatter)
    check_kind_curves(at, *c.reduce_scatter, ctx + "." + kReduceScatterKey, c.reduce_scatter->has_algorithm_figures(),
                      intra_node);
  if (const std::string lacking = lacks_pinned(c); !lacking.empty())
    throw_bad_input(at, ctx + ".algorithm pins nvls, but " + lacking);
}

}  // namespace profile_io

}  // namespace domino
