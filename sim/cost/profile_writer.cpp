// profile_writer.cpp: writes a profile as YAML that load_profile reads back identically (the profiler's
// output path). Numbers use the shortest text that round-trips, so saved profiles are byte-stable.
#include <fmt/format.h>

#include <algorithm>

#include "sim/cost/profile.hpp"
#include "sim/trace/timeline.hpp"
#include "sim/base/files.hpp"

namespace domino {

namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default: out += c;
    }
  }
  return out + "\"";
}

std::string num(double v) { return fmt::format("{}", v); }

void write_curve(std::string& out, const char* indent, const std::vector<EfficiencyPoint>& curve) {
  out += fmt::format("{}efficiency:  # [gflop, efficiency]\n", indent);
  for (const auto& p : curve) out += fmt::format("{}  - [{}, {}]\n", indent, num(p.gflop), num(p.efficiency));
}

void write_curve_figures(std::string& out, const std::string& indent, const CollectiveCurve& c) {
  out += fmt::format("{}latency_us: {}\n{}bus_bandwidth_gbps: {}\n", indent, num(c.latency_us), indent,
                     num(c.bus_bandwidth_gbps));
  if (c.table.empty()) return;
  out += indent + "table:  # [bytes, bus_bandwidth_gbps]\n";
  for (const auto& r : c.table) out += fmt::format("{}  - [{}, {}]\n", indent, num(r.bytes), num(r.bus_bandwidth_gbps));
}

void write_algorithm(std::string& out, const std::string& indent, CollectiveAlgorithm a, const CollectiveCurve& c) {
  out += fmt::format("{}{}:\n", indent, collective_algorithm_name(a));
  if (c.sms > 0) out += fmt::format("{}  sms: {}\n", indent, c.sms);
  if (a == CollectiveAlgorithm::Nvls) out += fmt::format("{}  min_ranks: {}\n", indent, c.min_ranks);
  write_curve_figures(out, indent + "  ", c);
}

// One kind's curves at `indent`: the single-curve form for a ring alone (what profiles measured on the CPU
// backend hold), else the algorithms form.
void write_kind_curves(std::string& out, const std::string& indent, const AlgorithmCurves& k, bool algorithms_form) {
  if (!algorithms_form) {
    write_curve_figures(out, indent, k.ring);
    return;
  }
  out += indent + "algorithms:\n";
  write_algorithm(out, indent + "  ", CollectiveAlgorithm::Ring, k.ring);
  if (k.nvls) write_algorithm(out, indent + "  ", CollectiveAlgorithm::Nvls, *k.nvls);
}

void write_collective(std::string& out, const char* key, const CollectiveProfile& c) {
  out += fmt::format("  {}:\n", key);
  if (c.sync_us > 0) out += fmt::format("    sync_us: {}\n", num(c.sync_us));
  if (c.sync_per_compute > 0) out += fmt::format("    sync_per_compute: {}\n", num(c.sync_per_compute));
  if (c.pinned) out += fmt::format("    algorithm: {}\n", collective_algorithm_name(*c.pinned));
  write_kind_curves(out, "    ", {c.ring(), c.nvls}, c.has_algorithm_figures());
  const std::pair<const char*, const std::optional<AlgorithmCurves>&> gather[] = {{"allgather", c.allgather},
                                                                                  {"reduce_scatter", c.reduce_scatter}};
  for (const auto& [name, curves] : gather) {
    if (!curves) continue;
    out += fmt::format("    {}:\n", name);
    write_kind_curves(out, "      ", *curves, curves->has_algorithm_figures());
  }
}

void write_gpu(std::string& out, const GpuProfile& g) {
  out += fmt::format("gpu:\n  sms: {}\n  tile_m: {}\n  tile_n: {}\n  mainloop_efficiency: {}\n  tile_fixed_us: {}\n",
                     g.sms, g.tile_m, g.tile_n, num(g.mainloop_efficiency), num(g.tile_fixed_us));
  if (!g.other_tiles.empty()) {
    out += "  other_tiles:\n";
    for (const auto& [tm, tn] : g.other_tiles) out += fmt::format("    - [{}, {}]\n", tm, tn);
  }
  out += fmt::format("  transpose_efficiency: {}\n  attention_tile_m: {}\n  collective_sms: {}\n",
                     num(g.transpose_efficiency), g.attention_tile_m, g.collective_sms);
  out += fmt::format("  hbm_bandwidth_gbps: {}\n  collective_hbm_bytes_per_bus_byte: {}\n", num(g.hbm_bandwidth_gbps),
                     num(g.collective_hbm_bytes_per_bus_byte));
}

}  // namespace

std::string profile_to_yaml(const Profile& p) {
  std::string out = "# Hardware profile (docs/profile-format.md).\n";
  out += "name: " + quoted(p.name) + "\n";
  if (!p.source.empty()) out += "source: " + quoted(p.source) + "\n";
  if (!p.notes.empty()) out += "notes: " + quoted(p.notes) + "\n";
  out += fmt::format("devices_per_node: {}\n", p.devices_per_node);
  if (p.nodes > 0) out += fmt::format("nodes: {}\n", p.nodes);
  out += "gemm:\n";
  for (int d = 0; d < kNumDTypes; ++d) {
    const auto& g = p.gemm[d];
    if (!g) continue;
    out += fmt::format("  {}:\n    peak_tflops: {}\n", profile_dtype_key(static_cast<DType>(d)), num(g->peak_tflops));
    write_curve(out, "    ", g->efficiency);
    if (!g->table.empty()) {
      const bool transposes = std::any_of(g->table.begin(), g->table.end(), [](const GemmTiming& r) { return r.transpose.has_value(); });
      const bool blocks =
          std::any_of(g->table.begin(), g->table.end(), [](const GemmTiming& r) { return r.blocks > 1; });
      out += !transposes ? "    table:  # [m, n, k, time_us]\n"
             : blocks ? "    table:  # [m, n, k, time_us], [m, n, k, transpose_a, transpose_b, time_us] or "
                        "[m, n, k, transpose_a, transpose_b, blocks, time_us]\n"
                      : "    table:  # [m, n, k, time_us] or [m, n, k, transpose_a, transpose_b, time_us]\n";
      for (const auto& r : g->table) {
        if (r.transpose && r.blocks > 1)
          out += fmt::format("      - [{}, {}, {}, {}, {}, {}, {}]\n", r.m, r.n, r.k, int(r.transpose->a),
                             int(r.transpose->b), r.blocks, num(r.time_us));
        else if (r.transpose)
          out += fmt::format("      - [{}, {}, {}, {}, {}, {}]\n", r.m, r.n, r.k, int(r.transpose->a), int(r.transpose->b),
                             num(r.time_us));
        else
          out += fmt::format("      - [{}, {}, {}, {}]\n", r.m, r.n, r.k, num(r.time_us));
      }
    }
  }
  out += fmt::format("memory:\n  bandwidth_gbps: {}\n  launch_overhead_us: {}\n", num(p.memory.bandwidth_gbps),
                     num(p.memory.launch_overhead_us));
  if (p.memory.cache_bytes > 0) out += fmt::format("  cache_bytes: {}\n", num(p.memory.cache_bytes));
  for (const auto& [key, costs] : {std::pair{"per_kind", &p.memory.per_kind}, std::pair{"per_code", &p.memory.per_code}}) {
    if (!costs->empty()) out += fmt::format("  {}:\n", key);
    for (const auto& [name, c] : *costs)
      out +=
          fmt::format("    {}: {{bandwidth_gbps: {}, launch_overhead_us: {}{}{}{}}}\n", name,
                      num(c.bandwidth_gbps), num(c.launch_overhead_us),
                      c.chunk_row_us > 0 ? ", chunk_row_us: " + num(c.chunk_row_us) : std::string(),
                      c.cached_bandwidth_gbps > 0 ? ", cached_bandwidth_gbps: " + num(c.cached_bandwidth_gbps)
                                                  : std::string(),
                      c.later_chunk_bandwidth_gbps > 0
                          ? ", later_chunk_bandwidth_gbps: " + num(c.later_chunk_bandwidth_gbps)
                          : std::string());
  }
  out += "attention:\n";
  if (p.attention.efficiency.empty()) {
    out += fmt::format("  relative_efficiency: {}\n", num(p.attention.relative_efficiency));
  } else {
    write_curve(out, "  ", p.attention.efficiency);
  }
  if (!p.attention.per_code.empty()) out += "  per_code:\n";
  for (const auto& [name, c] : p.attention.per_code)
    out += fmt::format("    {}: {{launch_overhead_us: {}, gflops: {}, bandwidth_gbps: {}}}\n", name,
                       num(c.launch_overhead_us), num(c.gflops), num(c.bandwidth_gbps));
  out += "collectives:\n";
  write_collective(out, "intra_node", p.intra_node);
  if (p.inter_node) write_collective(out, "inter_node", *p.inter_node);
  if (p.gpu) {
    write_gpu(out, *p.gpu);
  } else {
    out += fmt::format("interference:\n  compute_slowdown_during_comm: {}\n  comm_slowdown_during_compute: {}\n",
                       num(p.interference.compute_slowdown_during_comm),
                       num(p.interference.comm_slowdown_during_compute));
    for (const auto& [key, field] : kOptionalInterferenceTerms)
      if (p.interference.*field > 0) out += fmt::format("  {}: {}\n", key, num(p.interference.*field));
  }
  const ProfileMetadata& md = p.metadata;
  if (!md.empty()) {
    out += "metadata:\n";
    if (!md.machine.empty()) out += "  machine: " + quoted(md.machine) + "\n";
    if (!md.date.empty()) out += "  date: " + quoted(md.date) + "\n";
    if (!md.build_flags.empty()) out += "  build_flags: " + quoted(md.build_flags) + "\n";
    if (!md.library_versions.empty()) {
      out += "  library_versions:\n";
      for (const auto& [k, v] : md.library_versions) out += "    " + quoted(k) + ": " + quoted(v) + "\n";
    }
    if (!md.spread.empty()) {
      out += "  spread:\n";
      for (const auto& [k, v] : md.spread) out += "    " + quoted(k) + ": " + num(v) + "\n";
    }
  }
  return out;
}

void save_profile(const Profile& p, const std::string& path) {
  validate_profile(p);
  write_file_atomic(path, profile_to_yaml(p));
}

}  // namespace domino
