// profile_fit_compute.cpp: the compute terms of fit_profile (see profile_fit_terms.hpp): memory-bound ops
// (fixed cost + bandwidth, least squares, in general and per kind), the GEMM table with a peak and an
// efficiency curve over size, attention's efficiency curve against the GEMM peak and its per-opcode figures.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>

#include "sim/base/error.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/fit/profile_fit_terms.hpp"

namespace domino::prof::fitting {

namespace {

bool is_memory_kind(const std::string& k) {
  const auto& kinds = memory_bound_kinds();
  return std::find(kinds.begin(), kinds.end(), k) != kinds.end();
}

// A probe of an op on a column chunk (its rows parts of a buffer's rows): it pays per row beyond its bytes,
// so it stays out of the byte fits and gives the per-row term alone (MemoryCost::chunk_row_us).
bool on_column_chunk(const Point& pt) { return pt.entry.value("chunk", -1) >= 0; }

std::vector<EfficiencyPoint> efficiency_curve(const std::vector<double>& flops, const std::vector<double>& eff) {
  std::vector<double> gflop;
  for (double f : flops) gflop.push_back(f / 1e9);
  std::vector<EfficiencyPoint> curve;
  for (const CurvePoint& c : log_binned_median(gflop, eff, 0.25))
    curve.push_back({c.x, std::clamp(c.y, 1e-4, 1.0)});
  return curve;
}

// Time the compute part takes once the fixed cost is paid (never below half the measured time: the fixed
// cost is fitted on memory-bound ops and is only an estimate for GEMMs).
double compute_part(double t, double launch) { return std::max(t - launch, 0.5 * t); }

bool is_gemm(const Point& pt) { return pt.entry.at("kind") == "gemm"; }
// Products a GEMM probe ran back to back (a whole op of several row blocks; its m, n, k are one block's).
int64_t row_blocks(const Point& pt) { return pt.entry.value("row_blocks", int64_t(1)); }

// The transpose pair of a measured GEMM, from the opcode the probe ran (a probe without one: the forward).
GemmTranspose measured_transpose(const Point& pt) {
  const std::string code = pt.entry.value("code", std::string(to_string(OpCode::MatMul)));
  for (OpCode c : {OpCode::MatMulDgrad, OpCode::MatMulWgrad})
    if (code == to_string(c)) return gemm_transpose(c);
  return {};
}

// The best throughput of any GEMM (FLOP/us), and the dtype the GEMMs ran in: the CPU backend computes in
// fp32; other backends' probes carry the model's dtype (FitInput::gemms_in_op_dtype).
std::pair<double, DType> gemm_peak(const FitInput& in, const std::vector<Point>& compute, double launch) {
  double peak = 0;
  DType gemm_dtype = DType::FP32;
  for (const Point& pt : compute) {
    if (!is_gemm(pt) || row_blocks(pt) > 1) continue;
    if (in.gemms_in_op_dtype && pt.entry.contains("dtype")) gemm_dtype = DType(pt.entry["dtype"].get<int>());
    peak = std::max(peak, pt.entry.at("flops").get<double>() / compute_part(pt.t.median_us, launch));
  }
  if (!(peak > 0)) throw_runtime("profiler: no GEMM was measured");
  return {peak, gemm_dtype};
}

// One attention opcode's own figures (attention.per_code): launch + flops / rate + bytes / bandwidth by
// non-negative least squares on relative errors, kept only where they time the opcode's probes better (median
// relative error) than the efficiency curve does: a backend whose attention time is not affine in its FLOPs
// and bytes keeps the curve.
void fit_attention_code(const std::vector<Point>& compute, const std::string& code, FitOutput out) {
  std::vector<double> ones, flops, bytes, t;
  std::vector<Op> ops;
  for (const Point& pt : compute) {
    if (pt.entry.at("kind") != "attention" || pt.entry.value("code", std::string()) != code) continue;
    Op& op = ops.emplace_back();
    op.kind = OpKind::Attention;
    op.code = code == to_string(OpCode::AttnFwd) ? OpCode::AttnFwd : OpCode::AttnBwd;
    op.dtype = DType(pt.entry.value("dtype", int(DType::FP32)));
    op.flops = pt.entry.at("flops"), op.bytes = pt.entry.at("bytes");
    ones.push_back(1), flops.push_back(op.flops), bytes.push_back(op.bytes), t.push_back(pt.t.median_us);
  }
  if (t.size() < 4) return;  // three figures need more points than that
  const NonNegativeFit f = fit_non_negative({ones, flops, bytes}, t, relative_weights(t));
  if (!f.ok || !(f.c[1] > 0 || f.c[2] > 0)) return;
  const AttentionCost cost{f.c[0], f.c[1] > 0 ? 1e-3 / f.c[1] : 0, f.c[2] > 0 ? 1e-3 / f.c[2] : 0};
  Profile with_own = out.p;
  with_own.attention.per_code[code] = cost;
  const CostModel curve(out.p), own(with_own);
  std::vector<double> err_curve, err_own;
  for (size_t i = 0; i < t.size(); ++i) {
    // The CPU backend computes in fp32 whatever the model's dtype: the curve of the dtype the profile has.
    for (int k = 0; k < kNumDTypes && !curve.has_dtype(ops[i].dtype); ++k) ops[i].dtype = DType(k);
    err_curve.push_back(std::abs(curve.attention_us(ops[i]) / t[i] - 1));
    err_own.push_back(std::abs(own.attention_us(ops[i]) / t[i] - 1));
  }
  const double curve_err = median_of(err_curve), own_err = median_of(err_own);
  const bool keep = own_err < curve_err;
  out.summary += fmt::format(
      "attention {} ({} points): launch {:.1f} us + {:.4g} GFLOP/s + {:.4g} GB/s, median "
      "error {:.1f} % against the efficiency curve's {:.1f} %{}\n",
      code, t.size(), cost.launch_overhead_us, cost.gflops, cost.bandwidth_gbps, 100 * own_err,
      100 * curve_err, keep ? "" : " (not kept)");
  if (keep) out.p = with_own;
}

}  // namespace

// time = launch + bytes / bandwidth over every memory-bound op. Weights 1/t: between absolute error (the
// big ops dominate an iteration) and relative error (small ops are many).
void fit_memory_general(const std::vector<Point>& compute, FitOutput out) {
  std::vector<double> mx, my;
  for (const Point& pt : compute) {
    if (!is_memory_kind(pt.entry.at("kind").get<std::string>()) || on_column_chunk(pt)) continue;
    mx.push_back(pt.entry.at("bytes").get<double>());
    my.push_back(pt.t.median_us);
    out.p.metadata.spread["memory " + pt.entry.at("label").get<std::string>()] = pt.t.spread();
  }
  std::vector<double> mw;
  for (double t : my) mw.push_back(1.0 / t);
  LineFit mem = fit_line(mx, my, mw);
  if (!mem.ok || mem.a < 0 || !(mem.b > 0)) mem = fit_slope(mx, my, mw, 0);  // noise: bandwidth only
  if (!mem.ok || !(mem.b > 0)) throw_runtime("profiler: the memory-bound ops gave no usable bandwidth fit");
  out.p.memory.launch_overhead_us = mem.a;
  out.p.memory.bandwidth_gbps = 1.0 / mem.b / 1e3;
  std::vector<double> res_mem;
  for (size_t i = 0; i < mx.size(); ++i) res_mem.push_back(std::abs(mem.a + mem.b * mx[i] - my[i]) / my[i]);
  out.p.metadata.spread["fit.memory"] = p90(res_mem);
  out.summary += fmt::format("memory-bound ops ({} points): {:.3g} GB/s, {:.3g} us fixed cost; p90 residual {:.0f}%\n",
                             mx.size(), out.p.memory.bandwidth_gbps, out.p.memory.launch_overhead_us, 100 * p90(res_mem));
}

// The memory-bound points grouped by an entry field ("kind" or "code"), each group's own fixed cost and
// bandwidth from its whole-row probes, and its per-row term from its column-chunk probes (a group of chunks
// alone fits its line on them); returns the report text.
static std::string fit_memory_groups(const std::vector<Point>& compute, const char* field,
                                     std::map<std::string, MemoryCost>& into) {
  struct Group {
    std::vector<double> bytes, us;
    std::vector<std::array<double, 3>> chunked;  // bytes, rows, us
  };
  std::map<std::string, Group> groups;
  for (const Point& pt : compute) {
    if (!is_memory_kind(pt.entry.at("kind").get<std::string>()) || !pt.entry.contains(field)) continue;
    Group& g = groups[pt.entry.at(field).get<std::string>()];
    const double bytes = pt.entry.at("bytes").get<double>();
    if (on_column_chunk(pt))
      g.chunked.push_back({bytes, pt.entry.at("m").get<double>(), pt.t.median_us});
    else
      g.bytes.push_back(bytes), g.us.push_back(pt.t.median_us);
  }
  std::string text;
  for (auto& [name, g] : groups) {
    const bool rows_apart = !g.bytes.empty();
    if (!rows_apart)
      for (const auto& [bytes, m, t] : g.chunked) g.bytes.push_back(bytes), g.us.push_back(t);
    LineFit f = fit_line(g.bytes, g.us, relative_weights(g.us));
    if (!f.ok || f.a < 0 || !(f.b > 0)) f = fit_slope(g.bytes, g.us, relative_weights(g.us), 0);
    if (!f.ok || !(f.b > 0)) continue;
    PerRowExcess excess;  // the chunks above the whole-row line
    if (rows_apart)
      for (const auto& [bytes, m, t] : g.chunked) excess.add(t, f.a + f.b * bytes, m);
    const double per_row = excess.per_row_us();
    into[name] = MemoryCost{1 / f.b / 1e3, f.a, per_row};
    text += fmt::format("{}{} {:.3g} GB/s + {:.3g} us", text.empty() ? "" : ", ", name, 1 / f.b / 1e3, f.a);
    if (per_row > 0) text += fmt::format(" + {:.3g} us per row of a column chunk", per_row);
  }
  return text;
}

// A single bandwidth cannot fit every kind, nor one per kind every opcode of it (a norm's forward and
// backward differ 3x per byte): each kind and each opcode also gets its own (memory.per_kind, per_code).
void fit_memory_per_kind(const std::vector<Point>& compute, FitOutput out) {
  out.summary += "  per kind: " + fit_memory_groups(compute, "kind", out.p.memory.per_kind) + "\n";
  out.summary += "  per opcode: " + fit_memory_groups(compute, "code", out.p.memory.per_code) + "\n";
}

// The measured table, peak = best throughput, efficiency curve over size.
double fit_gemm(const FitInput& in, const std::vector<Point>& compute, FitOutput out) {
  const double launch = out.p.memory.launch_overhead_us;
  const auto [peak, gemm_dtype] = gemm_peak(in, compute, launch);
  GemmProfile g;
  std::vector<double> gflops, geff, gspread;
  // Forward GEMMs alone (the size grid) say nothing of the other pairs: their rows time every pair.
  const bool pairs_measured = std::any_of(compute.begin(), compute.end(), [](const Point& pt) {
    return is_gemm(pt) && measured_transpose(pt) != GemmTranspose{};
  });
  for (const Point& pt : compute) {
    if (!is_gemm(pt)) continue;
    const double flops = pt.entry.at("flops");
    const int64_t m = pt.entry.at("m"), n = pt.entry.at("n"), k = pt.entry.at("k");
    const GemmTranspose t = measured_transpose(pt);
    if (const int64_t blocks = row_blocks(pt); blocks > 1) {  // a whole op: its own row, not the curve's
      g.table.push_back({m, n, k, pt.t.median_us, t, blocks});
      out.p.metadata.spread[pt.entry.at("label").get<std::string>()] = pt.t.spread();
      continue;
    }
    g.table.push_back({m, n, k, pt.t.median_us, pairs_measured ? std::optional(t) : std::nullopt});
    gflops.push_back(flops);
    geff.push_back(flops / (peak * compute_part(pt.t.median_us, launch)));
    gspread.push_back(pt.t.spread());
    out.p.metadata.spread[fmt::format("gemm {}x{}x{}{}{}", m, n, k, t.a ? " Ta" : "", t.b ? " Tb" : "")] = pt.t.spread();
  }
  std::sort(g.table.begin(), g.table.end(), gemm_row_less);
  g.peak_tflops = peak / 1e6;
  g.efficiency = efficiency_curve(gflops, geff);
  out.p.metadata.spread["gemm"] = median_of(gspread);
  out.p.gemm[static_cast<int>(gemm_dtype)] = g;
  out.summary += fmt::format("GEMM ({} shapes): peak {:.4g} GFLOP/s, efficiency {:.2f} .. {:.2f}\n", g.table.size(),
                             g.peak_tflops * 1e3, g.efficiency.front().efficiency, g.efficiency.back().efficiency);
  return peak;
}

// Attention's own efficiency curve against the GEMM peak.
void fit_attention(const std::vector<Point>& compute, double peak, FitOutput out) {
  const double launch = out.p.memory.launch_overhead_us;
  std::vector<double> aflops, aeff, aspread;
  for (const Point& pt : compute) {
    if (pt.entry.at("kind") != "attention") continue;
    const double flops = pt.entry.at("flops");
    aflops.push_back(flops);
    aeff.push_back(flops / (peak * compute_part(pt.t.median_us, launch)));
    aspread.push_back(pt.t.spread());
    out.p.metadata.spread[pt.entry.at("label").get<std::string>()] = pt.t.spread();
  }
  if (aflops.empty()) {
    out.p.attention.relative_efficiency = 0.5;
    out.notes += "; attention not measured (relative_efficiency 0.5 assumed)";
    return;
  }
  out.p.attention.efficiency = efficiency_curve(aflops, aeff);
  out.p.metadata.spread["attention"] = median_of(aspread);
  out.summary += fmt::format("attention ({} points): efficiency {:.2f} .. {:.2f} of the GEMM peak\n", aflops.size(),
                             out.p.attention.efficiency.front().efficiency, out.p.attention.efficiency.back().efficiency);
}

void fit_attention_per_code(const std::vector<Point>& compute, FitOutput out) {
  for (const std::string& code : attention_codes()) fit_attention_code(compute, code, out);
}

}  // namespace domino::prof::fitting
