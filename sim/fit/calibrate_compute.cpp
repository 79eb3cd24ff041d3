// calibrate_compute.cpp: the compute terms of a calibration (see calibrate_terms.hpp): memory-bound ops
// (fixed cost + bandwidth, in general and per kind), a time scale per half-decade of FLOPs for GEMMs and
// attention, applied to the GEMM table and the efficiency curves, the compute stream's stall share, and the
// compute's slowdown in an iteration that communicates.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>

#include "sim/base/error.hpp"
#include "sim/fit/calibrate_terms.hpp"
#include "sim/fit/stats.hpp"
#include "sim/trace/trace_iterations.hpp"

namespace domino::prof::calibration {

namespace {

// Memory-bound ops: t = launch + c * bytes / bw_old. The per-row term of column chunks and the later chunks'
// bandwidth are scaled by c as well: a trace rarely has chunks at two row counts of one size to fit them on,
// and what makes a training step's bytes faster than the profiler's cold probes (data still in cache)
// shortens the run per row too.
std::optional<MemoryCost> fit_memory(const TraceSamples& in, const std::vector<const Sample*>& mem, MemoryCost old) {
  std::vector<double> x, y;
  for (const Sample* s : mem) {
    if (s->op.fresh_bytes > 0) continue;  // rows a collective left in cache: another speed (Op::fresh_bytes)
    if (later_chunk(s->op) && old.later_chunk_bandwidth_gbps > 0) continue;  // a later chunk's own speed
    x.push_back(s->op.bytes / (old.bandwidth_gbps * 1e3));
    y.push_back(in.interference_free(*s) - chunk_rows(s->op) * old.chunk_row_us);
  }
  double xmin = 1e300, xmax = 0;
  for (double v : x) xmin = std::min(xmin, v), xmax = std::max(xmax, v);
  std::vector<double> w;  // 1/t, as the profiler's fit: big ops dominate an iteration, small ones are many
  for (double t : y) w.push_back(t > 0 ? 1 / t : 0);
  LineFit f;
  if (x.size() >= 2 && xmax > 2 * xmin) f = fit_line(x, y, w);
  if (!f.ok || f.a < 0) f = fit_slope(x, y, w, f.ok && f.a < 0 ? 0 : old.launch_overhead_us);
  if (!f.ok || !(f.b > 0)) return std::nullopt;
  return MemoryCost{old.bandwidth_gbps / f.b, f.a, old.chunk_row_us * f.b, old.cached_bandwidth_gbps,
                    old.later_chunk_bandwidth_gbps / f.b};
}

// The bandwidth a column chunk's bytes stream at: a later chunk's own where the figures have one.
double chunk_bandwidth(const MemoryCost& figures, const Op& op) {
  return later_chunk(op) && figures.later_chunk_bandwidth_gbps > 0 ? figures.later_chunk_bandwidth_gbps
                                                                   : figures.bandwidth_gbps;
}

std::string memory_line(const std::string& what, size_t n, MemoryCost from, MemoryCost to) {
  return fmt::format("{} ({}): {:.3g} -> {:.3g} GB/s, fixed cost {:.3g} -> {:.3g} us\n", what, n, from.bandwidth_gbps,
                     to.bandwidth_gbps, from.launch_overhead_us, to.launch_overhead_us);
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

using OpFilter = std::function<bool(const Op&)>;

// The per-row term of `figures` (an opcode's or a kind's, whole-row figures fitted): the time of the chunk
// ops `named` picks above those figures, summed, over their rows summed (as an iteration adds them up; the
// rows of a row block's chunks are all counted on its first, chunk_rows, where the model charges them).
void fit_rows_of(const TraceSamples& in, const std::string& name, MemoryCost& figures, const OpFilter& named,
                 std::string& report) {
  PerRowExcess excess;
  for (const Sample* s : in.select(memory_bound))
    if (s->op.chunk >= 0 && named(s->op))
      excess.add(in.interference_free(*s),
                 figures.launch_overhead_us + s->op.bytes / (chunk_bandwidth(figures, s->op) * 1e3),
                 chunk_rows(s->op));
  if (!(excess.rows > 0)) return;
  report += fmt::format("  {} ({} ops on a column chunk): {:.3g} -> {:.3g} us per row\n", name, excess.points,
                        figures.chunk_row_us, excess.per_row_us());
  figures.chunk_row_us = excess.per_row_us();
}

// The bandwidth of `figures`' ops on a later column chunk that `named` picks (of the samples the trace's
// selection keeps: those that ran alone where enough did): their bytes, summed, over their time beyond the
// fixed cost, summed (as an iteration adds them up). Rows a collective has just written run at another speed
// (Op::fresh_bytes) and stay out.
void fit_later_chunks_of(const TraceSamples& in, const std::string& name, MemoryCost& figures,
                         const OpFilter& named, std::string& report) {
  double bytes = 0, us = 0;
  int ops = 0;
  for (const Sample* s : in.select(memory_bound))
    if (later_chunk(s->op) && s->op.fresh_bytes == 0 && named(s->op)) {
      bytes += s->op.bytes;
      us += in.interference_free(*s) - figures.launch_overhead_us;
      ++ops;
    }
  if (ops == 0 || !(us > 0)) return;
  const double gbps = bytes / us / 1e3;
  report += fmt::format("  {} ({} ops): {:.3g} GB/s, whole rows {:.3g} GB/s\n", name, ops, gbps,
                        figures.bandwidth_gbps);
  figures.later_chunk_bandwidth_gbps = gbps;
}

using EntryFit = void (*)(const TraceSamples&, const std::string&, MemoryCost&, const OpFilter&,
                          std::string&);

// Applies `fit` to each memory.per_code entry, then each memory.per_kind one (the ops each costs), under
// `heading`; `none` where no entry found ops of its kind in the trace.
void fit_memory_entries(const TraceSamples& in, Profile& p, EntryFit fit, const char* heading,
                        const char* none, std::string& report) {
  const size_t before = report.size();
  // Entries, not structured bindings: a lambda may not capture a binding before C++20 (clang 14 refuses).
  for (auto& entry : p.memory.per_code) {
    const std::string& name = entry.first;
    fit(
        in, name, entry.second, [&](const Op& op) { return name == to_string(op.code); }, report);
  }
  for (auto& entry : p.memory.per_kind) {
    const std::string& name = entry.first;
    fit(
        in, name, entry.second, [&](const Op& op) { return name == to_string(op.kind); }, report);
  }
  if (report.size() == before)
    report += none;
  else
    report.insert(before, heading);
}

// The band scales of one op kind's samples (durations without the old interference) against `cm`; appends
// the report line. nullopt when the trace has none of the kind.
std::optional<BandScales> fit_bands(const TraceSamples& in, const CostModel& cm, OpKind kind,
                                    std::string& report,
                                    const std::function<bool(const Op&)>& take = nullptr) {
  auto sel = in.select([&](OpKind k) { return k == kind; });
  if (take) std::erase_if(sel, [&](const Sample* s) { return !take(s->op); });
  if (sel.empty()) return std::nullopt;
  std::map<int, std::pair<double, double>> acc;  // sum measured, sum predicted
  for (const Sample* s : sel) {
    auto& a = acc[band_of(s->op.flops)];
    a.first += in.interference_free(*s);
    a.second += cm.op_us(s->op, in.tp, in.devices_per_node);
  }
  BandScales out;
  for (const auto& [b, a] : acc)
    if (a.second > 0) out.c[b] = a.first / a.second;
  std::string scales;
  for (const auto& [b, c] : out.c) scales += fmt::format(" 1e{:.1f}:{:.3f}", b / 2.0, c);
  report += fmt::format("{} ({} ops): time scale per FLOP band{}\n", to_string(kind), sel.size(), scales);
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

}  // namespace

void fit_memory_rows(const TraceSamples& in, Profile& p, std::string& report) {
  fit_memory_entries(in, p, fit_rows_of, "memory-bound ops on a column chunk, per row:\n",
                     "memory-bound ops on a column chunk: none in the trace, per-row terms kept\n", report);
}

void fit_later_chunks(const TraceSamples& in, Profile& p, std::string& report) {
  fit_memory_entries(in, p, fit_later_chunks_of, "memory-bound ops on a later column chunk:\n",
                     "memory-bound ops on a later column chunk: none in the trace, their bandwidth kept\n",
                     report);
}

// Over all memory-bound ops on whole rows (the general figures have no per-row term): the general figures.
void fit_memory_general(const TraceSamples& in, Profile& p, std::string& report) {
  const MemoryCost general{in.base.memory.bandwidth_gbps, in.base.memory.launch_overhead_us};
  auto mem = in.select(memory_bound);
  std::erase_if(mem, [](const Sample* s) { return s->op.chunk >= 0; });
  if (auto c = fit_memory(in, mem, general)) {
    p.memory.bandwidth_gbps = c->bandwidth_gbps;
    p.memory.launch_overhead_us = c->launch_overhead_us;
    report += memory_line("memory-bound ops", mem.size(), general, *c);
  }
}

// memory.per_kind, for each kind the trace has enough ops of. A kind whose ops all have about one size
// identifies no fixed cost of its own: it starts from (and keeps) the general fixed cost just fitted.
void fit_memory_per_kind(const TraceSamples& in, Profile& p, std::string& report) {
  const MemoryCost fitted{p.memory.bandwidth_gbps, p.memory.launch_overhead_us};
  for (const std::string& name : memory_bound_kinds()) {
    const auto of_kind = in.select([&](OpKind k) { return to_string(k) == name; });
    if (of_kind.size() < 3) continue;
    const auto own = in.base.memory.per_kind.find(name);
    const MemoryCost old = own == in.base.memory.per_kind.end() ? fitted : own->second;
    if (auto c = fit_memory(in, of_kind, old)) {
      p.memory.per_kind[name] = *c;
      report += memory_line("  " + name, of_kind.size(), old, *c);
    }
  }
}

// memory.per_code, for each opcode the base profile has figures for and the trace has ops of (an opcode
// without figures of its own keeps following its kind's, fitted above). Unlike a kind, an opcode is fitted
// from a single op: its figures override the kind's, so an opcode that runs once per iteration (the
// embedding, the loss's reductions) would otherwise keep the profiler's figures through every calibration.
// Ops of one size fit the bandwidth alone, keeping the fixed cost (fit_memory).
void fit_memory_per_code(const TraceSamples& in, Profile& p, std::string& report) {
  for (const auto& [name, old] : in.base.memory.per_code) {
    std::vector<const Sample*> of_code;
    for (const Sample* s : in.select([](OpKind k) { return memory_bound(k); }))
      if (name == to_string(s->op.code)) of_code.push_back(s);
    if (of_code.empty()) continue;
    if (auto c = fit_memory(in, of_code, old)) {
      p.memory.per_code[name] = *c;
      report += memory_line("  " + name, of_code.size(), old, *c);
    }
  }
}

void fit_gemm_scales(const TraceSamples& in, const CostModel& cm, Profile& p, std::string& report) {
  const auto bands = fit_bands(in, cm, OpKind::Gemm, report);
  auto& g = p.gemm[static_cast<int>(in.dtype)];
  if (!bands || !g) return;
  for (auto& r : g->table)
    r.time_us *= bands->at(2.0 * double(r.m) * double(r.n) * double(r.k) * double(r.blocks));
  scale_curve(g->efficiency, *bands, &g->peak_tflops);
}

// An attention opcode with figures of its own (attention.per_code) scales them by its ops' measured over
// predicted time; the others scale the curve; a profile without one has a single relative efficiency, scaled
// by the median band.
void fit_attention_scales(const TraceSamples& in, const CostModel& cm, Profile& p, std::string& report) {
  const auto attention = in.select([](OpKind k) { return k == OpKind::Attention; });
  for (auto& [name, cost] : p.attention.per_code) {
    double measured = 0, predicted = 0;
    int n = 0;
    for (const Sample* s : attention)
      if (name == to_string(s->op.code)) {
        measured += in.interference_free(*s);
        predicted += cm.op_us(s->op, in.tp, in.devices_per_node);
        ++n;
      }
    if (!(predicted > 0 && measured > 0)) continue;
    const double c = measured / predicted;
    cost.launch_overhead_us *= c;
    cost.gflops /= c;
    cost.bandwidth_gbps /= c;
    report += fmt::format("attention {} ({} ops): time scale {:.3f}\n", name, n, c);
  }
  const auto bands = fit_bands(in, cm, OpKind::Attention, report, [&](const Op& op) {
    return !p.attention.per_code.contains(to_string(op.code));
  });
  if (!bands) return;
  if (!p.attention.efficiency.empty()) {
    scale_curve(p.attention.efficiency, *bands, nullptr);
    return;
  }
  std::vector<double> scales;
  for (const auto& [b, s] : bands->c) scales.push_back(s);
  const double c = median_of(scales);
  p.attention.relative_efficiency = std::clamp(p.attention.relative_efficiency / c, 1e-4, 1.0);
}

// The ranks' compute streams end an iteration later than the sum of the ops' typical times: the stream idles
// between ops (measured: 37-44 us per op on a 2-vCPU VM, whatever the op), the slower rank sets the pace and
// ops are preempted (their mean exceeds their median). On a trace without collectives all of it is stall: the
// gaps per op, and the rest as a share of the ops' costs.
double compute_gap_per_op(const TraceFile& trace) {
  // A prediction's gaps are the model's own stall (share and per op alike), not a measurement of the stream.
  if (trace.source == "predicted") return -1;
  std::vector<std::vector<TraceEvent>> iterations = every_iteration(trace);
  if (iterations.empty()) iterations.push_back(trace.events);
  double gaps = 0;
  int64_t pairs = 0;
  for (const std::vector<TraceEvent>& events : iterations) {
    std::map<int32_t, std::vector<const TraceEvent*>> by_rank;
    for (const TraceEvent& e : events)
      if (e.stream == int32_t(Stream::Compute)) by_rank[e.rank].push_back(&e);
    for (auto& [rank, ops] : by_rank) {
      std::sort(ops.begin(), ops.end(),
                [](const TraceEvent* a, const TraceEvent* b) { return a->start_us < b->start_us; });
      for (size_t i = 1; i < ops.size(); ++i, ++pairs)
        gaps += std::max(0.0, ops[i]->start_us - (ops[i - 1]->start_us + ops[i - 1]->dur_us));
    }
  }
  return pairs > 0 ? gaps / double(pairs) : -1;
}

void fit_compute_stall(const TraceSamples& in, double iteration_us, double gap_per_op_us, Profile& p,
                       std::string& report) {
  const SerialCost ops = in.serial_cost(CostModel(p), 0.0, 0.0);  // the ops' own costs
  if (ops.collectives > 0)
    throw_bad_input(
        fmt::format("--fit stall needs a trace without collectives (no-comm), whose iteration beyond "
                    "its compute ops is all stall; this one has {} collectives",
                    ops.collectives));
  if (!(ops.us > 0)) throw_bad_input("--fit stall: the trace has no compute op to charge a stall to");
  const double beyond = std::max(0.0, iteration_us - ops.us);
  const double per_op =
      std::min({std::max(gap_per_op_us, 0.0), beyond / ops.compute_ops, kMaxComputeStallPerOpUs});
  const double share = std::clamp((beyond - per_op * ops.compute_ops) / ops.us, 0.0, kMaxComputeStallShare);
  report += fmt::format(
      "compute stall from the iteration time ({:.1f} ms measured, {:.1f} ms of compute op costs, {} ops, "
      "{}): per op {:.3g} -> {:.3g} us, share {:.3g} -> {:.3g}\n",
      iteration_us / 1e3, ops.us / 1e3, ops.compute_ops,
      gap_per_op_us >= 0 ? fmt::format("gaps of {:.3g} us per op measured", gap_per_op_us)
                         : std::string("no gap measured"),
      p.interference.compute_stall_per_op_us, per_op, p.interference.compute_stall_share, share);
  p.interference.compute_stall_per_op_us = per_op;
  p.interference.compute_stall_share = share;
}

// The compute ops of a trace with collectives (megatron-sync, none of whose compute runs beside one) against
// their costs fitted on no-comm's: measured over predicted, summed as an iteration adds them up, less one.
void fit_compute_with_comm(const TraceSamples& in, Profile& p, std::string& report) {
  const auto compute = in.select([](OpKind k) { return !collective(k); });
  if (!in.communicates || compute.empty())
    throw_bad_input(
        "--fit comm_compute needs a trace with collectives and compute ops (megatron-sync), whose compute is "
        "set against the profile's costs fitted without communication (no-comm)");
  const CostModel cm(p);
  double measured = 0, predicted = 0;
  for (const Sample* s : compute) {
    measured += in.interference_free(*s) * in.compute_stretch(in.base);  // with the slowdown it came in with
    predicted += cm.op_us(s->op, in.tp, in.devices_per_node);
  }
  if (!(predicted > 0))
    throw_bad_input("--fit comm_compute: the trace's compute ops cost nothing in the profile");
  const double slowdown = std::clamp(measured / predicted - 1, 0.0, kMaxCommComputeSlowdown);
  report += fmt::format(
      "compute slowdown in a communicating iteration ({} compute ops, {:.1f} ms measured, "
      "{:.1f} ms of costs): {:.3g} -> {:.3g}\n",
      compute.size(), measured / 1e3, predicted / 1e3, p.interference.compute_slowdown_with_comm, slowdown);
  p.interference.compute_slowdown_with_comm = slowdown;
}

}  // namespace domino::prof::calibration
