// profile_gpu.cpp: the profile's gpu section (GEMM tiles in waves, SMs and HBM shared with collectives) and
// its alternative, the flat interference factors: reading, and the checks for profiles built in code.
#include <cmath>

#include "sim/base/error.hpp"
#include "sim/cost/profile_checks.hpp"

namespace domino::profile_io {

namespace {

constexpr int kMaxCount = 1 << 16;  // SMs, tile sizes: far above any GPU's, a larger figure is a typo

// A collective's SMs come out of the GPU's: each algorithm must leave some for the GEMM beside it. The
// reason when one does not, else "".
std::string collective_sms_conflict(const Profile& p) {
  const auto level = [&](const CollectiveProfile& c, const std::string& name) -> std::string {
    for (const auto& [algorithm, sms] : {std::pair{"ring", c.ring_sms}, {"nvls", c.nvls ? c.nvls->sms : 0}})
      if (sms >= p.gpu->sms)
        return "collectives." + name + ".algorithms." + algorithm + ".sms " + std::to_string(sms) +
               " leaves no SM of the " + std::to_string(p.gpu->sms) + " for compute beside it";
    return "";
  };
  std::string why = level(p.intra_node, "intra_node");
  if (why.empty() && p.inter_node) why = level(*p.inter_node, "inter_node");
  return why;
}

void validate_gpu(const GpuProfile& g, const InterferenceProfile& flat, const SourceLoc& at) {
  require_positive(at, "gpu.sms", g.sms);
  require_positive(at, "gpu.tile_m", g.tile_m);
  require_positive(at, "gpu.tile_n", g.tile_n);
  for (const auto& [tm, tn] : g.other_tiles) {
    require_positive(at, "gpu.other_tiles rows", tm);
    require_positive(at, "gpu.other_tiles columns", tn);
  }
  require_positive(at, "gpu.attention_tile_m", g.attention_tile_m);
  require_fraction(at, "gpu.mainloop_efficiency", g.mainloop_efficiency);
  require_non_negative(at, "gpu.tile_fixed_us", g.tile_fixed_us);
  require_fraction(at, "gpu.transpose_efficiency", g.transpose_efficiency);
  if (g.collective_sms < 0 || g.collective_sms >= g.sms) {
    throw_bad_input(at, "gpu.collective_sms must be in [0, sms - 1], got " + std::to_string(g.collective_sms));
  }
  require_positive(at, "gpu.hbm_bandwidth_gbps", g.hbm_bandwidth_gbps);
  require_non_negative(at, "gpu.collective_hbm_bytes_per_bus_byte", g.collective_hbm_bytes_per_bus_byte);
  bool flat_terms = flat.compute_slowdown_during_comm != 0 || flat.comm_slowdown_during_compute != 0;
  for (const auto& [key, field] : kOptionalInterferenceTerms) flat_terms = flat_terms || flat.*field != 0;
  if (flat_terms) {
    throw_bad_input(at, "interference factors must be zero with a gpu section (it models interference itself)");
  }
}

double fraction(YamlMap& m, const std::string& key) {
  const double v = m.get_double(key);
  if (!(v > 0 && v <= 1)) m.fail(key, "must be in (0, 1], got " + num(v));
  return v;
}

GpuProfile read_gpu(const std::string& file, const YAML::Node& node) {
  YamlMap m(node, file, "profile gpu");
  m.finish({"sms", "tile_m", "tile_n", "other_tiles", "mainloop_efficiency", "tile_fixed_us", "transpose_efficiency",
            "attention_tile_m", "collective_sms", "hbm_bandwidth_gbps", "collective_hbm_bytes_per_bus_byte"});
  GpuProfile g;
  g.sms = count_in(m, "sms", 1, kMaxCount);
  g.tile_m = count_in(m, "tile_m", 1, kMaxCount);
  g.tile_n = count_in(m, "tile_n", 1, kMaxCount);
  if (auto t = m.opt_node("other_tiles")) {
    std::vector<SourceLoc> locs;
    const auto rows = read_rows(file, *t, "profile gpu.other_tiles", 2, "[tile_m, tile_n]", locs);
    for (size_t i = 0; i < rows.size(); ++i) {
      for (double v : rows[i])
        if (!(v >= 1 && v <= kMaxCount && v == std::floor(v)))
          throw_bad_input(locs[i], "profile gpu.other_tiles: each tile is [rows, columns], whole counts in [1, " + std::to_string(kMaxCount) + "]");
      g.other_tiles.push_back({int(rows[i][0]), int(rows[i][1])});
    }
  }
  g.mainloop_efficiency = fraction(m, "mainloop_efficiency");
  g.tile_fixed_us = non_negative(m, "tile_fixed_us");
  g.transpose_efficiency = fraction(m, "transpose_efficiency");
  g.attention_tile_m = count_in(m, "attention_tile_m", 1, kMaxCount);
  g.collective_sms = m.has("collective_sms") ? static_cast<int>(m.get_int("collective_sms")) : 0;
  if (g.collective_sms < 0 || g.collective_sms >= g.sms) {
    m.fail("collective_sms", "must be in [0, sms - 1] (" + std::to_string(g.sms - 1) + "), got " +
                                 std::to_string(g.collective_sms));
  }
  g.hbm_bandwidth_gbps = positive(m, "hbm_bandwidth_gbps");
  g.collective_hbm_bytes_per_bus_byte = non_negative(m, "collective_hbm_bytes_per_bus_byte");
  return g;
}

}  // namespace

// The gpu section's mechanism replaces the flat factors: a profile gives one or the other.
void read_gpu_or_interference(YamlMap& root, const std::string& file, Profile& p) {
  if (auto g = root.opt_node("gpu")) {
    p.gpu = read_gpu(file, *g);
    if (const std::string why = collective_sms_conflict(p); !why.empty()) {
      YamlMap(*g, file, "profile gpu").fail("sms", why);
    }
    if (root.has("interference")) {
      root.fail("interference", "the gpu section models interference (SMs and HBM shared with collectives); "
                                "remove the flat interference factors");
    }
    return;
  }
  YamlMap intf(root.get_node("interference"), file, "profile interference");
  std::vector<std::string> keys{"compute_slowdown_during_comm", "comm_slowdown_during_compute"};
  for (const auto& term : kOptionalInterferenceTerms) keys.push_back(term.key);
  intf.finish(keys);
  p.interference.compute_slowdown_during_comm = non_negative(intf, "compute_slowdown_during_comm");
  p.interference.comm_slowdown_during_compute = non_negative(intf, "comm_slowdown_during_compute");
  for (const auto& [key, field] : kOptionalInterferenceTerms)
    if (intf.has(key)) p.interference.*field = non_negative(intf, key);
  if (p.interference.compute_stall_share > kMaxComputeStallShare)
    intf.fail("compute_stall_share", "must be at most " + num(kMaxComputeStallShare) + ", got " +
                                         num(p.interference.compute_stall_share));
  if (p.interference.compute_stall_per_op_us > kMaxComputeStallPerOpUs)
    intf.fail("compute_stall_per_op_us", "must be at most " + num(kMaxComputeStallPerOpUs) + ", got " +
                                             num(p.interference.compute_stall_per_op_us));
  if (p.interference.compute_slowdown_with_comm > kMaxCommComputeSlowdown)
    intf.fail("compute_slowdown_with_comm", "must be at most " + num(kMaxCommComputeSlowdown) + ", got " +
                                                num(p.interference.compute_slowdown_with_comm));
}

void check_gpu(const Profile& p, const SourceLoc& at) {
  validate_gpu(*p.gpu, p.interference, at);
  if (const std::string why = collective_sms_conflict(p); !why.empty()) throw_bad_input(at, why);
}

int count_in(YamlMap& m, const std::string& key, int lo, int hi) {
  const int64_t v = m.get_int(key);
  if (v < lo || v > hi) {
    m.fail(key, "must be a count in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(v));
  }
  return static_cast<int>(v);
}

}  // namespace domino::profile_io
