// compare_report_svg.cpp: the two figures of the HTML report, as inline SVG: the Gantt chart of
// predicted over measured per rank and stream, and the bar chart of duration error by op kind.
// No xmlns or other URLs: the report must not mention any external resource.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "sim/compare/report_html.hpp"

namespace domino {
namespace {

constexpr double kLabelW = 180, kPlotW = 1090, kRowH = 14, kRowGap = 3, kRankGap = 14, kAxisH = 26;

// A "nice" tick step (1, 2 or 5 times a power of ten) giving about `ticks` ticks over span.
double nice_step(double span, int ticks) {
  if (span <= 0) return 1;
  double raw = span / ticks, mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 5.0, 10.0})
    if (raw <= f * mag) return f * mag;
  return 10 * mag;
}

struct Row {
  std::string label;
  const TraceFile* trace;
  int shown_rank;         // the rank block the row belongs to
  int rank, stream;       // whose events it draws (a rank-0-only prediction stands for every rank)
  double origin;          // subtracted from ts so both sides start at 0
  bool measured;
  const SideSummary* side;
};

double min_start(const TraceFile& t) {
  double m = INFINITY;
  for (const TraceEvent& e : t.events) m = std::min(m, e.start_us);
  return std::isfinite(m) ? m : 0;
}


// The rows of the Gantt chart: per rank, predicted then measured, compute then comm.
std::vector<Row> gantt_rows(const TraceFile& predicted, const TraceFile& measured, const Comparison& c) {
  std::set<int> p_ranks, m_ranks;
  for (const TraceEvent& e : predicted.events) p_ranks.insert(e.rank);
  for (const TraceEvent& e : measured.events) m_ranks.insert(e.rank);
  std::set<int> ranks = m_ranks;
  ranks.insert(p_ranks.begin(), p_ranks.end());
  const bool p_rank0_only = p_ranks.size() == 1 && p_ranks.count(0);
  const double p0 = min_start(predicted), m0 = min_start(measured);

  std::vector<Row> rows;
  for (int r : ranks) {
    int pr = p_ranks.count(r) ? r : (p_rank0_only ? 0 : -1);
    for (int s = 0; s < 2; ++s) {
      const char* stream = s == 0 ? "compute" : "comm";
      if (pr >= 0)
        rows.push_back({fmt::format("rank {} predicted{} · {}", r, pr != r ? "*" : "", stream), &predicted, r, pr, s, p0,
                        false, &c.predicted});
    }
    for (int s = 0; s < 2; ++s)
      if (m_ranks.count(r))
        rows.push_back({fmt::format("rank {} measured · {}", r, s == 0 ? "compute" : "comm"), &measured, r, r, s, m0, true,
                        &c.measured});
  }
  return rows;
}

// What every row's events are drawn against: the time scale, the aligned ops and both critical paths.
struct GanttContext {
  GanttContext(const Comparison& c, double px_per_us)
      : scale(px_per_us),
        p_path(c.predicted.critical_path.begin(), c.predicted.critical_path.end()),
        m_path(c.measured.critical_path.begin(), c.measured.critical_path.end()) {
    for (const OpComparison& op : c.ops) aligned[op.id] = &op;
  }
  double scale;
  std::map<std::string, const OpComparison*> aligned;
  std::set<std::string> p_path, m_path;
};

// The tick grid and labels along the time axis, in ms for long iterations.
std::string time_axis(double t_max, double scale, double height) {
  std::string svg;
  const double step = nice_step(t_max, 10);
  const bool in_ms = t_max >= 20000;  // long iterations read better in milliseconds
  for (double t = 0; t <= t_max + 1e-9; t += step) {
    double x = kLabelW + t * scale;
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.0f}\" x2=\"{0:.1f}\" y2=\"{2:.0f}\" class=\"grid\"/>"
                       "<text x=\"{0:.1f}\" y=\"{3:.0f}\" class=\"tick\">{4:g}</text>\n",
                       x, kAxisH - 4, height - 4, kAxisH - 8, in_ms ? t / 1000 : t);
  }
  svg += fmt::format("<text x=\"{:.0f}\" y=\"12\" class=\"tick\">{}</text>\n", kLabelW - 24, in_ms ? "ms" : "us");
  return svg;
}

// The tooltip of one event: its times on this side and, when aligned, on both.
std::string event_tip(const TraceEvent& e, const Row& row, const GanttContext& ctx, bool critical) {
  std::string tip = fmt::format("{} ({})\nstart {:.1f} us, {} {:.2f} us", e.id, e.kind, e.start_us - row.origin,
                                row.measured ? "measured" : "predicted", e.dur_us);
  auto a = ctx.aligned.find(e.id);
  if (a != ctx.aligned.end()) {
    tip += fmt::format("\npredicted {:.2f} us, measured {:.2f} us", a->second->predicted_us, a->second->measured_us);
    if (a->second->error_pct >= 0) tip += fmt::format(" (error {:.1f}%)", a->second->error_pct);
  } else {
    tip += row.measured ? "\nnot in the prediction" : "\nnot in the measurement";
  }
  if (critical) tip += "\non the critical path";
  return tip;
}

// One lane: its background and label, then a bar per event of the row's rank and stream.
std::string row_svg(const Row& row, double row_y, const GanttContext& ctx) {
  std::string svg = fmt::format("<rect x=\"{:.0f}\" y=\"{:.1f}\" width=\"{:.0f}\" height=\"{:.0f}\" class=\"lane{}\"/>"
                                "<text x=\"4\" y=\"{:.1f}\" class=\"label\">{}</text>\n",
                                kLabelW, row_y, kPlotW, kRowH, row.measured ? " m" : "", row_y + kRowH - 3,
                                html_escape(row.label));
  const std::set<std::string>& path = row.measured ? ctx.m_path : ctx.p_path;
  const bool path_rank = row.rank == row.side->critical_rank;
  for (const TraceEvent& e : row.trace->events) {
    if (e.rank != row.rank || e.stream != row.stream) continue;
    const bool critical = path_rank && path.count(e.id);
    // Critical ops get a dark strip along the bottom (an outline would blacken dense stretches).
    const double x = kLabelW + (e.start_us - row.origin) * ctx.scale, w = std::max(0.6, e.dur_us * ctx.scale);
    svg += fmt::format("<g><title>{}</title><rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"{}\"/>",
                       html_escape(event_tip(e, row, ctx, critical)), x, row_y + 1, w, kRowH - 2, kind_colour(e.kind));
    if (critical)
      svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"3\" class=\"cp\"/>", x,
                         row_y + kRowH - 4, w);
    svg += "</g>\n";
  }
  return svg;
}
}  // namespace

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ch;
    }
  }
  return out;
}

const char* kind_colour(const std::string& kind) {
  static const std::map<std::string, const char*> colours = {
      {"gemm", "#4e79a7"},      {"attention", "#f28e2b"}, {"norm", "#76b7b2"},      {"activation", "#59a14f"},
      {"elementwise", "#edc948"}, {"copy", "#b07aa1"},    {"allreduce", "#e15759"}, {"optimizer", "#9c755f"},
      {"embedding", "#ff9da7"}, {"loss", "#8c8c8c"},      {"allgather", "#d37295"}, {"reducescatter", "#b6992d"}};
  std::string key;
  for (char ch : kind) key += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  auto it = colours.find(key);
  return it == colours.end() ? "#bab0ac" : it->second;
}

std::string gantt_svg(const TraceFile& predicted, const TraceFile& measured, const Comparison& c) {
  const std::vector<Row> rows = gantt_rows(predicted, measured, c);
  const double p0 = min_start(predicted), m0 = min_start(measured);
  double t_max = 0;
  for (const TraceEvent& e : predicted.events) t_max = std::max(t_max, e.start_us + e.dur_us - p0);
  for (const TraceEvent& e : measured.events) t_max = std::max(t_max, e.start_us + e.dur_us - m0);
  if (t_max <= 0) t_max = 1;
  const GanttContext ctx(c, kPlotW / t_max);

  // Row y positions: a gap between ranks.
  std::vector<double> row_y;
  double y = kAxisH;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i > 0 && rows[i].shown_rank != rows[i - 1].shown_rank) y += kRankGap;
    row_y.push_back(y);
    y += kRowH + kRowGap;
  }
  const double height = y + 6, width = kLabelW + kPlotW + 30;  // room for the last tick label

  std::string svg = fmt::format(
      "<svg class=\"gantt\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" role=\"img\" "
      "aria-label=\"Gantt chart, predicted over measured\">\n",
      width, height);
  svg += time_axis(t_max, ctx.scale, height);
  for (size_t i = 0; i < rows.size(); ++i) svg += row_svg(rows[i], row_y[i], ctx);
  svg += "</svg>\n";
  return svg;
}

std::string kind_error_svg(const Comparison& c) {
  const double bar_h = 12, group_h = 34, label_w = 120, plot_w = 520;
  double top = 0;
  for (const KindError& k : c.by_kind) top = std::max(top, k.p90_pct);
  top = top > 0 ? top * 1.1 : 1;
  const double height = 24 + group_h * static_cast<double>(c.by_kind.size()) + 8, width = label_w + plot_w + 110;
  std::string svg = fmt::format(
      "<svg class=\"bars\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" role=\"img\" "
      "aria-label=\"duration error by op kind\">\n"
      "<rect x=\"{2:.0f}\" y=\"4\" width=\"10\" height=\"10\" fill=\"#4e79a7\"/><text x=\"{3:.0f}\" y=\"13\" class=\"tick\">median</text>"
      "<rect x=\"{4:.0f}\" y=\"4\" width=\"10\" height=\"10\" fill=\"#a0cbe8\"/><text x=\"{5:.0f}\" y=\"13\" class=\"tick\">p90</text>\n",
      width, height, label_w, label_w + 14, label_w + 70, label_w + 84);
  double y = 24;
  for (const KindError& k : c.by_kind) {
    svg += fmt::format("<text x=\"4\" y=\"{:.0f}\" class=\"label\">{} ({})</text>\n", y + bar_h + 2, html_escape(k.kind), k.count);
    const double values[2] = {k.median_pct, k.p90_pct};
    const char* fills[2] = {"#4e79a7", "#a0cbe8"};
    for (int b = 0; b < 2; ++b) {
      double w = std::max(1.0, values[b] / top * plot_w), by = y + b * (bar_h + 2);
      svg += fmt::format("<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"{:.1f}\" height=\"{:.0f}\" fill=\"{}\"><title>{} {}: {:.1f}%</title></rect>"
                         "<text x=\"{:.1f}\" y=\"{:.0f}\" class=\"tick\">{:.1f}%</text>\n",
                         label_w, by, w, bar_h, fills[b], html_escape(k.kind), b == 0 ? "median" : "p90", values[b],
                         label_w + w + 4, by + bar_h - 2, values[b]);
    }
    y += group_h;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace domino
