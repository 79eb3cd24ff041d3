// profile.cpp: strict reading of hardware profiles (every problem located as file:line:col) and
// validation of profiles built in code. Collective levels live in profile_collectives.cpp, the GEMM table in
// profile_gemm_table.cpp, writing in profile_writer.cpp.
#include "sim/cost/profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sim/ir/schedule.hpp"
#include "sim/base/whole_number.hpp"
#include "sim/base/yaml_reader.hpp"
#include "sim/cost/profile_checks.hpp"

namespace domino {

const char* profile_dtype_key(DType d) {
  switch (d) {
    case DType::BF16: return "bf16";
    case DType::FP16: return "fp16";
    case DType::FP32: return "fp32";
  }
  return "?";
}

// --- checks shared by the YAML reader (located) and validate_profile (named) ---

namespace profile_io {

std::string num(double v) { return fmt::format("{}", v); }

void require_positive(const SourceLoc& at, const std::string& what, double v) {
  if (!(v > 0)) throw_bad_input(at, what + " must be positive, got " + num(v));
}
void require_non_negative(const SourceLoc& at, const std::string& what, double v) {
  if (!(v >= 0)) throw_bad_input(at, what + " must be zero or positive, got " + num(v));
}

void check_bus_table(const std::vector<BusBandwidthPoint>& table, const std::string& what,
                     const std::vector<SourceLoc>& at) {
  for (size_t i = 0; i < table.size(); ++i) {
    const SourceLoc& where = at.size() > i ? at[i] : (at.empty() ? SourceLoc{} : at.back());
    require_positive(where, what + ": bytes", table[i].bytes);
    require_positive(where, what + ": bus bandwidth", table[i].bus_bandwidth_gbps);
    if (i > 0 && !(table[i].bytes > table[i - 1].bytes)) {
      throw_bad_input(where, what + ": not sorted: bytes " + num(table[i].bytes) + " after " +
                                 num(table[i - 1].bytes) + " (bytes must strictly increase)");
    }
  }
}

namespace {

double scalar_number(const std::string& file, const YAML::Node& n, const std::string& what) {
  if (!n.IsScalar()) throw_bad_input(loc_of(file, n), what + ": expected a number");
  try {
    return n.as<double>();
  } catch (const YAML::Exception&) {
    throw_bad_input(loc_of(file, n), what + ": expected a number, got '" + n.Scalar() + "'");
  }
}

}  // namespace

std::vector<std::vector<double>> read_rows(const std::string& file, const YAML::Node& list,
                                           const std::string& what, size_t width, const char* row_form,
                                           std::vector<SourceLoc>& locs, std::vector<size_t> other_widths) {
  if (!list.IsSequence()) throw_bad_input(loc_of(file, list), what + ": expected a list of " + row_form + " rows");
  std::vector<std::vector<double>> rows;
  for (const YAML::Node& row : list) {
    const bool other = std::find(other_widths.begin(), other_widths.end(), row.size()) != other_widths.end();
    if (!row.IsSequence() || (row.size() != width && !other)) {
      throw_bad_input(loc_of(file, row), what + ": each row must be a list " + row_form);
    }
    std::vector<double> values;
    for (const YAML::Node& v : row) values.push_back(scalar_number(file, v, what));
    rows.push_back(std::move(values));
    locs.push_back(loc_of(file, row));
  }
  return rows;
}

double positive(YamlMap& m, const std::string& key) {
  const double v = m.get_double(key);
  if (!(v > 0)) m.fail(key, "must be positive, got " + num(v));
  return v;
}
double non_negative(YamlMap& m, const std::string& key) {
  const double v = m.get_double(key);
  if (!(v >= 0)) m.fail(key, "must be zero or positive, got " + num(v));
  return v;
}

void require_fraction(const SourceLoc& at, const std::string& what, double v) {
  if (!(v > 0 && v <= 1)) throw_bad_input(at, what + " must be in (0, 1], got " + num(v));
}

}  // namespace profile_io

using namespace profile_io;

namespace {

const DType kDTypes[kNumDTypes] = {DType::BF16, DType::FP16, DType::FP32};

void check_curve(const std::vector<EfficiencyPoint>& curve, const std::string& what,
                 const std::vector<SourceLoc>& at) {
  if (curve.empty()) throw_bad_input(at.empty() ? SourceLoc{} : at[0], what + ": needs at least one [gflop, efficiency] point");
  for (size_t i = 0; i < curve.size(); ++i) {
    const SourceLoc& where = at.size() > i ? at[i] : at.back();
    require_positive(where, what + ": gflop", curve[i].gflop);
    require_fraction(where, what + ": efficiency", curve[i].efficiency);
    if (i > 0 && !(curve[i].gflop > curve[i - 1].gflop)) {
      throw_bad_input(where, what + ": not sorted: gflop " + num(curve[i].gflop) + " after " +
                                 num(curve[i - 1].gflop) + " (gflop must strictly increase)");
    }
  }
}

// --- YAML reading ---

std::vector<EfficiencyPoint> read_curve(YamlMap& m, const std::string& key, const std::string& what) {
  std::vector<SourceLoc> locs;
  const YAML::Node list = m.get_node(key);
  std::vector<EfficiencyPoint> curve;
  for (const auto& r : read_rows(m.file(), list, what, 2, "[gflop, efficiency]", locs)) curve.push_back({r[0], r[1]});
  if (locs.empty()) locs.push_back(loc_of(m.file(), list));
  check_curve(curve, what, locs);
  return curve;
}

GemmProfile read_gemm(const std::string& file, const YAML::Node& node, const std::string& ctx) {
  YamlMap m(node, file, ctx);
  m.finish({"peak_tflops", "efficiency", "table"});
  GemmProfile g;
  g.peak_tflops = positive(m, "peak_tflops");
  g.efficiency = read_curve(m, "efficiency", ctx + ".efficiency");
  if (auto t = m.opt_node("table")) g.table = read_gemm_table(file, *t, ctx + ".table");
  return g;
}

// memory.per_kind or memory.per_code: {bandwidth_gbps, launch_overhead_us[, chunk_row_us][,
// cached_bandwidth_gbps][, later_chunk_bandwidth_gbps]} under each of `names` present.
std::map<std::string, MemoryCost> read_memory_costs(YamlMap& mem, const std::string& key,
                                                    const std::vector<std::string>& names) {
  std::map<std::string, MemoryCost> out;
  const auto node = mem.opt_node(key);
  if (!node) return out;
  YamlMap entries(*node, mem.file(), "profile memory." + key);
  for (const std::string& name : names) {
    if (auto entry = entries.opt_node(name)) {
      YamlMap e(*entry, mem.file(), "profile memory." + key + "." + name);
      out[name] = MemoryCost{
          positive(e, "bandwidth_gbps"), non_negative(e, "launch_overhead_us"),
          e.has("chunk_row_us") ? non_negative(e, "chunk_row_us") : 0.0,
          e.has("cached_bandwidth_gbps") ? non_negative(e, "cached_bandwidth_gbps") : 0.0,
          e.has("later_chunk_bandwidth_gbps") ? non_negative(e, "later_chunk_bandwidth_gbps") : 0.0};
      e.finish();
    }
  }
  entries.finish();
  return out;
}

void check_memory_costs(const SourceLoc& at, const std::map<std::string, MemoryCost>& costs, const std::string& key,
                        const std::vector<std::string>& names, const char* what) {
  for (const auto& [name, c] : costs) {
    if (std::find(names.begin(), names.end(), name) == names.end())
      throw_bad_input(at, "profile memory." + key + ": '" + name + "' is not " + what);
    require_positive(at, "memory." + key + "." + name + ".bandwidth_gbps", c.bandwidth_gbps);
    require_non_negative(at, "memory." + key + "." + name + ".launch_overhead_us", c.launch_overhead_us);
    require_non_negative(at, "memory." + key + "." + name + ".chunk_row_us", c.chunk_row_us);
    require_non_negative(at, "memory." + key + "." + name + ".cached_bandwidth_gbps",
                         c.cached_bandwidth_gbps);
    require_non_negative(at, "memory." + key + "." + name + ".later_chunk_bandwidth_gbps",
                         c.later_chunk_bandwidth_gbps);
  }
}

constexpr const char* kPerCodeWithGpu =
    "cannot be given with a gpu section (the gpu section times attention by its tiles over the SMs)";

// attention.per_code: {launch_overhead_us, gflops, bandwidth_gbps} under AttnFwd and AttnBwd.
std::map<std::string, AttentionCost> read_attention_costs(YamlMap& attn) {
  std::map<std::string, AttentionCost> out;
  const auto node = attn.opt_node("per_code");
  if (!node) return out;
  YamlMap entries(*node, attn.file(), "profile attention.per_code");
  for (const std::string& name : attention_codes()) {
    if (auto entry = entries.opt_node(name)) {
      YamlMap e(*entry, attn.file(), "profile attention.per_code." + name);
      const AttentionCost c{non_negative(e, "launch_overhead_us"), non_negative(e, "gflops"),
                            non_negative(e, "bandwidth_gbps")};
      if (!(c.gflops > 0) && !(c.bandwidth_gbps > 0))
        e.fail("gflops", "is 0 and so is bandwidth_gbps: give at least one rate (a 0 drops its term)");
      out[name] = c;
      e.finish();
    }
  }
  entries.finish();
  return out;
}

void check_attention_costs(const SourceLoc& at, const Profile& p) {
  const auto& codes = attention_codes();
  for (const auto& [name, c] : p.attention.per_code) {
    const std::string what = "attention.per_code." + name;
    if (std::find(codes.begin(), codes.end(), name) == codes.end())
      throw_bad_input(
          at, "profile attention.per_code: '" + name + "' is not an attention opcode (AttnFwd, AttnBwd)");
    require_non_negative(at, what + ".launch_overhead_us", c.launch_overhead_us);
    require_non_negative(at, what + ".gflops", c.gflops);
    require_non_negative(at, what + ".bandwidth_gbps", c.bandwidth_gbps);
    if (!(c.gflops > 0) && !(c.bandwidth_gbps > 0))
      throw_bad_input(at, what + ": gflops and bandwidth_gbps are both 0");
  }
  if (p.gpu && !p.attention.per_code.empty())
    throw_bad_input(at, std::string("attention.per_code ") + kPerCodeWithGpu);
}

ProfileMetadata read_metadata(const std::string& file, const YAML::Node& node) {
  YamlMap m(node, file, "profile metadata");
  m.finish({"machine", "date", "build_flags", "library_versions", "spread"});
  ProfileMetadata md;
  md.machine = m.opt_string("machine").value_or("");
  md.date = m.opt_string("date").value_or("");
  md.build_flags = m.opt_string("build_flags").value_or("");
  if (auto v = m.opt_node("library_versions")) {
    YamlMap lib(*v, file, "profile metadata.library_versions");
    for (auto it = v->begin(); it != v->end(); ++it) {
      const std::string key = key_name(file, "profile metadata.library_versions", it->first);
      md.library_versions[key] = lib.get_string(key);
    }
  }
  if (auto v = m.opt_node("spread")) {
    YamlMap sp(*v, file, "profile metadata.spread");
    for (auto it = v->begin(); it != v->end(); ++it) {
      const std::string key = key_name(file, "profile metadata.spread", it->first);
      md.spread[key] = non_negative(sp, key);
    }
  }
  return md;
}

Profile read_profile(const YAML::Node& root, const std::string& file) {
  YamlMap m(root, file, "profile");
  // Unknown keys first: a misspelt required key is reported as a typo, not as missing.
  m.finish({"name", "source", "notes", "devices_per_node", "nodes", "gemm", "memory", "attention", "collectives",
            "interference", "gpu", "metadata"});
  Profile p;
  p.path = file;
  p.name = m.get_string("name");
  if (p.name.empty()) m.fail("name", "must not be empty");
  p.source = m.opt_string("source").value_or("");
  p.notes = m.opt_string("notes").value_or("");
  const int64_t dpn = m.get_int("devices_per_node");
  if (dpn <= 0 || dpn > 1 << 20) m.fail("devices_per_node", "must be a positive count, got " + std::to_string(dpn));
  p.devices_per_node = static_cast<int>(dpn);
  if (auto nodes = m.opt_int("nodes")) {
    if (*nodes <= 0 || *nodes > 1 << 20) m.fail("nodes", "must be a positive count, got " + std::to_string(*nodes));
    p.nodes = static_cast<int>(*nodes);
  }

  YamlMap gemm(m.get_node("gemm"), file, "profile gemm");
  gemm.finish({"bf16", "fp16", "fp32"});
  bool any = false;
  for (DType d : kDTypes) {
    const char* key = profile_dtype_key(d);
    if (auto n = gemm.opt_node(key)) {
      p.gemm[static_cast<int>(d)] = read_gemm(file, *n, std::string("profile gemm.") + key);
      any = true;
    }
  }
  if (!any) throw_bad_input(gemm.where(), "profile gemm: needs figures for at least one of bf16, fp16, fp32");

  YamlMap mem(m.get_node("memory"), file, "profile memory");
  p.memory.bandwidth_gbps = positive(mem, "bandwidth_gbps");
  p.memory.launch_overhead_us = non_negative(mem, "launch_overhead_us");
  p.memory.per_kind = read_memory_costs(mem, "per_kind", memory_bound_kinds());
  p.memory.per_code = read_memory_costs(mem, "per_code", memory_bound_codes());
  if (mem.has("cache_bytes")) p.memory.cache_bytes = non_negative(mem, "cache_bytes");
  mem.finish();

  YamlMap attn(m.get_node("attention"), file, "profile attention");
  p.attention.per_code = read_attention_costs(attn);
  attn.finish({"relative_efficiency", "efficiency"});
  const bool has_rel = attn.has("relative_efficiency"), has_curve = attn.has("efficiency");
  if (has_rel == has_curve) {
    throw_bad_input(attn.where(), "profile attention: give exactly one of relative_efficiency, efficiency");
  }
  if (has_rel) {
    p.attention.relative_efficiency = attn.get_double("relative_efficiency");
    require_fraction(attn.where("relative_efficiency"), "profile attention: 'relative_efficiency'",
                     p.attention.relative_efficiency);
  } else {
    p.attention.efficiency = read_curve(attn, "efficiency", "profile attention.efficiency");
  }

  YamlMap coll(m.get_node("collectives"), file, "profile collectives");
  coll.finish({"intra_node", "inter_node"});
  p.intra_node = read_collective(file, coll.get_node("intra_node"), "profile collectives.intra_node", true);
  if (auto n = coll.opt_node("inter_node"))
    p.inter_node = read_collective(file, *n, "profile collectives.inter_node", false);

  read_gpu_or_interference(m, file, p);
  if (p.gpu && !p.attention.per_code.empty()) attn.fail("per_code", kPerCodeWithGpu);

  if (auto md = m.opt_node("metadata")) p.metadata = read_metadata(file, *md);
  return p;
}

}  // namespace

const std::vector<std::string>& memory_bound_kinds() {
  static const std::vector<std::string> kinds = [] {
    std::vector<std::string> out;
    for (int k = 0; k < kNumOpKinds; ++k)
      if (memory_bound(OpKind(k))) out.push_back(to_string(OpKind(k)));
    return out;
  }();
  return kinds;
}

const std::vector<std::string>& memory_bound_codes() {
  static const std::vector<std::string> codes = [] {
    std::vector<std::string> out;
    for (int c = 0; c <= int(OpCode::ReduceScatter); ++c)
      if (memory_bound(kind_of(OpCode(c)))) out.push_back(to_string(OpCode(c)));
    return out;
  }();
  return codes;
}

const std::vector<std::string>& attention_codes() {
  static const std::vector<std::string> codes = {to_string(OpCode::AttnFwd), to_string(OpCode::AttnBwd)};
  return codes;
}

Profile load_profile(const std::string& path) { return read_profile(load_yaml_file(path), path); }

Profile load_profile_string(const std::string& yaml, const std::string& name) {
  return read_profile(load_yaml_string(yaml, name), name);
}

const OptionalInterferenceTerm kOptionalInterferenceTerms[7] = {
    {"comm_delay_during_compute_us", &InterferenceProfile::comm_delay_during_compute_us},
    {"compute_stall_share", &InterferenceProfile::compute_stall_share},
    {"compute_stall_per_op_us", &InterferenceProfile::compute_stall_per_op_us},
    {"comm_start_wait_us", &InterferenceProfile::comm_start_wait_us},
    {"comm_start_wait_decay_us", &InterferenceProfile::comm_start_wait_decay_us},
    {"comm_resume_wait_us", &InterferenceProfile::comm_resume_wait_us},
    {"compute_slowdown_with_comm", &InterferenceProfile::compute_slowdown_with_comm}};

void validate_profile(const Profile& p) {
  const SourceLoc at{"profile '" + p.name + "'"};
  if (p.name.empty()) throw_bad_input(at, "name must not be empty");
  if (p.devices_per_node <= 0) throw_bad_input(at, "devices_per_node must be positive");
  if (p.nodes < 0) throw_bad_input(at, "nodes must be zero (unstated) or positive");
  bool any = false;
  for (DType d : kDTypes) {
    const auto& g = p.gemm[static_cast<int>(d)];
    if (!g) continue;
    any = true;
    const std::string ctx = std::string("gemm.") + profile_dtype_key(d);
    require_positive(at, ctx + ".peak_tflops", g->peak_tflops);
    check_curve(g->efficiency, ctx + ".efficiency", {at});
    check_gemm_table(g->table, ctx + ".table", {at});
  }
  if (!any) throw_bad_input(at, "gemm needs figures for at least one of bf16, fp16, fp32");
  require_positive(at, "memory.bandwidth_gbps", p.memory.bandwidth_gbps);
  require_non_negative(at, "memory.launch_overhead_us", p.memory.launch_overhead_us);
  require_non_negative(at, "memory.cache_bytes", p.memory.cache_bytes);
  check_memory_costs(at, p.memory.per_kind, "per_kind", memory_bound_kinds(), "a memory-bound op kind");
  check_memory_costs(at, p.memory.per_code, "per_code", memory_bound_codes(), "an opcode of a memory-bound op kind");
  if (p.attention.efficiency.empty()) {
    require_fraction(at, "attention.relative_efficiency", p.attention.relative_efficiency);
  } else {
    check_curve(p.attention.efficiency, "attention.efficiency", {at});
  }
  check_attention_costs(at, p);
  check_collective(at, p.intra_node, "collectives.intra_node", true);
  if (p.inter_node) check_collective(at, *p.inter_node, "collectives.inter_node", false);
  require_non_negative(at, "interference.compute_slowdown_during_comm", p.interference.compute_slowdown_during_comm);
  require_non_negative(at, "interference.comm_slowdown_during_compute", p.interference.comm_slowdown_during_compute);
  for (const auto& [key, field] : kOptionalInterferenceTerms)
    require_non_negative(at, std::string("interference.") + key, p.interference.*field);
  if (!(p.interference.compute_stall_share >= 0 &&
        p.interference.compute_stall_share <= kMaxComputeStallShare))
    throw_bad_input(at, "interference.compute_stall_share must be in [0, " + num(kMaxComputeStallShare) +
                            "], got " + num(p.interference.compute_stall_share));
  if (!(p.interference.compute_stall_per_op_us <= kMaxComputeStallPerOpUs))
    throw_bad_input(at, "interference.compute_stall_per_op_us must be in [0, " +
                            num(kMaxComputeStallPerOpUs) + "], got " +
                            num(p.interference.compute_stall_per_op_us));
  if (!(p.interference.compute_slowdown_with_comm <= kMaxCommComputeSlowdown))
    throw_bad_input(at, "interference.compute_slowdown_with_comm must be in [0, " +
                            num(kMaxCommComputeSlowdown) + "], got " +
                            num(p.interference.compute_slowdown_with_comm));
  if (p.gpu) check_gpu(p, at);
  for (const auto& [key, v] : p.metadata.spread) require_non_negative(at, "metadata.spread." + key, v);
}

}  // namespace domino
