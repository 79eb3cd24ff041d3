// profile_collectives.cpp: a profile's collective levels (collectives.intra_node, inter_node): reading
// either form (one ring curve, or per-algorithm curves with their SM counts and a pin), and the checks
// validate_profile applies to levels built in code (docs/profile-format.md).
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

void read_algorithms(const std::string& file, const YAML::Node& node, const std::string& ctx, bool intra_node,
                     CollectiveProfile& c) {
  YamlMap m(node, file, ctx);
  m.finish(algorithm_names());  // an unknown name, with the closest suggested
  if (!m.has("ring")) {
    throw_bad_input(m.where(), ctx + ": needs ring (NCCL falls back to ring wherever no other algorithm runs)");
  }
  const CollectiveCurve ring = read_algorithm(file, m.get_node("ring"), ctx + ".ring", CollectiveAlgorithm::Ring);
  c.latency_us = ring.latency_us;
  c.bus_bandwidth_gbps = ring.bus_bandwidth_gbps;
  c.table = ring.table;
  c.ring_sms = ring.sms;
  if (!m.has("nvls")) return;
  if (!intra_node) m.fail("nvls", "NVLS (NVLink SHARP) runs inside one NVLink domain only, not across nodes");
  c.nvls = read_algorithm(file, m.get_node("nvls"), ctx + ".nvls", CollectiveAlgorithm::Nvls);
}

}  // namespace

CollectiveProfile read_collective(const std::string& file, const YAML::Node& node, const std::string& ctx,
                                  bool intra_node) {
  YamlMap m(node, file, ctx);
  if (m.has("sms") && !m.has("algorithms"))
    m.fail("sms", "SMs are stated per algorithm: give the level's curves under algorithms (algorithms.ring.sms)");
  std::vector<std::string> keys = kCurveKeys;
  keys.insert(keys.end(), {"sync_us", "algorithm", "algorithms"});
  m.finish(keys);
  CollectiveProfile c;
  if (m.has("sync_us")) c.sync_us = non_negative(m, "sync_us");
  if (auto algorithms = m.opt_node("algorithms")) {
    for (const std::string& key : kCurveKeys)
      if (m.has(key)) m.fail(key, "with algorithms, the ring's figures go under algorithms.ring");
    read_algorithms(file, *algorithms, ctx + ".algorithms", intra_node, c);
  } else {
    const CollectiveCurve ring = read_curve_figures(m, ctx);
    c.latency_us = ring.latency_us;
    c.bus_bandwidth_gbps = ring.bus_bandwidth_gbps;
    c.table = ring.table;
  }
  if (auto pin = m.opt_enum("algorithm", algorithm_names())) {
    c.pinned = collective_algorithm_from_name(*pin);
    if (c.pinned == CollectiveAlgorithm::Nvls && !c.nvls)
      m.fail("algorithm", "pins nvls, but the level has no algorithms.nvls curve");
  }
  return c;
}

void check_collective(const SourceLoc& at, const CollectiveProfile& c, const std::string& ctx, bool intra_node) {
  const auto check_curve = [&](const CollectiveCurve& curve, const std::string& what) {
    require_non_negative(at, what + ".latency_us", curve.latency_us);
    require_positive(at, what + ".bus_bandwidth_gbps", curve.bus_bandwidth_gbps);
    check_bus_table(curve.table, what + ".table", {at});
    if (curve.sms < 0 || curve.sms > kMaxSms) throw_bad_input(at, what + ".sms must be a count in [0, " + std::to_string(kMaxSms) + "]");
  };
  require_non_negative(at, ctx + ".sync_us", c.sync_us);
  check_curve(c.ring(), c.has_algorithm_figures() ? ctx + ".algorithms.ring" : ctx);
  if (c.nvls) {
    if (!intra_node) throw_bad_input(at, ctx + ": NVLS runs inside one NVLink domain only, not across nodes");
    check_curve(*c.nvls, ctx + ".algorithms.nvls");
    if (c.nvls->min_ranks < 2) throw_bad_input(at, ctx + ".algorithms.nvls.min_ranks must be a count from 2");
  }
  if (c.pinned == CollectiveAlgorithm::Nvls && !c.nvls)
    throw_bad_input(at, ctx + ".algorithm pins nvls, but the level has no algorithms.nvls curve");
}

}  // namespace profile_io

}  // namespace domino
