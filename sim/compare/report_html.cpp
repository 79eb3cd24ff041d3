// report_html.cpp: assembles the one-file HTML report of domino-compare (summary, Gantt, error by kind,
// top error ops, critical paths, plan and model). Everything is inline so the file opens offline.
#include "sim/compare/report_html.hpp"
#include "sim/base/files.hpp"

#include <fmt/format.h>

#include <cmath>
#include <set>

namespace domino {
namespace {

using nlohmann::json;

const char* kStyle = R"(
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; }
.sub { color: #555; margin-bottom: 16px; }
table { border-collapse: collapse; } td, th { padding: 3px 10px; border-bottom: 1px solid #eee; text-align: right; }
th { background: #f4f4f4; } td.l, th.l { text-align: left; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; min-width: 150px; }
.card .v { font-size: 20px; font-weight: 600; } .card .k { color: #666; font-size: 12px; }
.bad { color: #b3261e; } .good { color: #1b7f3b; }
svg text { font: 11px sans-serif; fill: #333; } svg .label { font-size: 11px; } svg .tick { fill: #666; }
svg .grid { stroke: #e4e4e4; } svg .lane { fill: #f7f7f7; } svg .lane.m { fill: #eef3f8; }
svg .cp { fill: #111; }
.legend span { display: inline-block; margin-right: 14px; } .sw { display: inline-block; width: 12px; height: 12px; vertical-align: -2px; margin-right: 4px; }
pre { background: #f6f6f6; padding: 10px; overflow: auto; max-height: 420px; font-size: 12px; }
.warn { background: #fff4e5; border: 1px solid #f0c36d; padding: 6px 10px; margin: 4px 0; }
.scroll { overflow-x: auto; }
)";

std::string scalar_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// "model · plan · TP" from the traces' domino objects; a value the two sides disagree on shows both.
std::string plan_line(const TraceFile& p, const TraceFile& m) {
  auto value = [](const TraceFile& t, const char* key) -> std::string {
    auto it = t.meta.find(key);
    if (it == t.meta.end() || it->is_null()) return "";
    return it->is_object() && it->contains("name") ? scalar_text((*it)["name"]) : scalar_text(*it);
  };
  std::string out;
  for (const char* key : {"model", "strategy", "tp"}) {
    std::string pv = value(p, key), mv = value(m, key);
    std::string v = pv.empty() ? mv : mv.empty() || mv == pv ? pv : pv + " (predicted) / " + mv + " (measured)";
    if (v.empty()) continue;
    const std::string k = key;
    out += (out.empty() ? "" : " · ") + std::string(k == "tp" ? "TP " : k == "strategy" ? "plan " : "") + v;
  }
  return out.empty() ? "no plan or model recorded in the traces" : out;
}

std::string card(const std::string& key, const std::string& value, const std::string& cls = "") {
  return fmt::format("<div class=\"card\"><div class=\"k\">{}</div><div class=\"v {}\">{}</div></div>\n", key, cls, value);
}

std::string summary_section(const Comparison& c) {
  std::string s = "<div class=\"cards\">\n";
  s += card("iteration time, predicted", fmt::format("{:.1f} us", c.predicted.iteration_us));
  s += card("iteration time, measured", fmt::format("{:.1f} us", c.measured.iteration_us));
  s += card("iteration time error", fmt::format("{:+.1f}%", c.iteration_error_pct),
            std::abs(c.iteration_error_pct) <= 5 ? "good" : "bad");
  s += card("op duration error, median / p90", fmt::format("{:.1f}% / {:.1f}%", c.op_error_median_pct, c.op_error_p90_pct));
  s += "</div>\n<table>\n<tr><th class=\"l\"></th><th>predicted</th><th>measured</th></tr>\n";
  auto row = [&](const char* name, const std::string& p, const std::string& m) {
    s += fmt::format("<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td></tr>\n", name, p, m);
  };
  row("iteration time (us)", fmt::format("{:.1f} ({})", c.predicted.iteration_us, c.predicted.iteration_from),
      fmt::format("{:.1f} ({})", c.measured.iteration_us, c.measured.iteration_from));
  row("communication busy (us)", fmt::format("{:.1f}", c.predicted.comm_busy_us), fmt::format("{:.1f}", c.measured.comm_busy_us));
  row("exposed communication (us)", fmt::format("{:.1f}", c.predicted.exposed_comm_us), fmt::format("{:.1f}", c.measured.exposed_comm_us));
  row("overlap fraction", fmt::format("{:.3f}", c.predicted.overlap_fraction), fmt::format("{:.3f}", c.measured.overlap_fraction));
  row("critical path (ops, rank)", fmt::format("{} (rank {})", c.predicted.critical_path.size(), c.predicted.critical_rank),
      fmt::format("{} (rank {})", c.measured.critical_path.size(), c.measured.critical_rank));
  row("ops on this side only", std::to_string(c.only_in_predicted.size()), std::to_string(c.only_in_measured.size()));
  s += "</table>\n";
  s += fmt::format("<p>Ops aligned by id: {} ({} aligned, {} scored). Measured duration of an op: {}.</p>\n",
                   html_escape(c.mode), c.ops.size(), c.scored_ops, html_escape(c.measured_durations));
  for (const std::string& w : c.warnings) s += "<div class=\"warn\">" + html_escape(w) + "</div>\n";
  return s;
}

std::string legend(const TraceFile& p, const TraceFile& m) {
  std::set<std::string> kinds;
  for (const TraceFile* t : {&p, &m})
    for (const TraceEvent& e : t->events) kinds.insert(e.kind);
  std::string s = "<p class=\"legend\">";
  for (const std::string& k : kinds)
    s += fmt::format("<span><i class=\"sw\" style=\"background:{}\"></i>{}</span>", kind_colour(k), html_escape(k));
  s += "<span><i class=\"sw\" style=\"background:#4e79a7;border-bottom:3px solid #111;height:9px\"></i>critical path "
       "(dark strip)</span></p>\n";
  return s;
}

std::string pct_cell(double pct) { return pct < 0 ? "-" : fmt::format("{:.1f}%", pct); }

// The spread column (half the p10-p90 width of an op's iterations over its median) is the noise an error
// is to be read against.
std::string kind_table(const Comparison& c) {
  std::string s = "<table>\n<tr><th class=\"l\">kind</th><th>ops</th><th>median error</th><th>p90 error</th>"
                  "<th>spread over iterations</th></tr>\n";
  for (const KindError& k : c.by_kind)
    s += fmt::format("<tr><td class=\"l\">{}</td><td>{}</td><td>{:.1f}%</td><td>{:.1f}%</td><td>{}</td></tr>\n",
                     html_escape(k.kind), k.count, k.median_pct, k.p90_pct, pct_cell(k.spread_pct));
  return s + "</table>\n";
}

// A collective judged apart (compare.hpp) shows its transfer in the duration columns and its arrival wait,
// predicted / measured, in the last.
std::string top_ops_table(const Comparison& c) {
  std::string s =
      "<table>\n<tr><th class=\"l\">op</th><th class=\"l\">kind</th><th>predicted us</th><th>measured us</th>"
      "<th>measured p10-p90 us</th><th>delta us</th><th>error</th><th>critical path</th>"
      "<th>arrival wait us, predicted / measured</th></tr>\n";
  for (const OpComparison& op : c.top_error_ops)
    s += fmt::format(
        "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{:.2f}</td><td>{:.2f}</td><td>{}</td>"
        "<td>{:+.2f}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        html_escape(op.id), html_escape(op.kind), op.predicted_us, op.measured_us,
        op.measured_p10_us < 0 ? "-" : fmt::format("{:.2f}-{:.2f}", op.measured_p10_us, op.measured_p90_us),
        op.delta_us(), pct_cell(op.error_pct), op.on_critical_path ? "yes" : "",
        op.predicted_wait_us < 0 ? "-"
                                 : fmt::format("{:.0f} / {:.0f}", op.predicted_wait_us, op.measured_wait_us));
  return s + "</table>\n";
}

std::string id_list(const char* title, const std::vector<std::string>& ids) {
  std::string s = fmt::format("<details><summary>{} ({})</summary><pre>", title, ids.size());
  for (const std::string& id : ids) s += html_escape(id) + "\n";
  return s + "</pre></details>\n";
}

}  // namespace

std::string render_html_report(const TraceFile& predicted, const TraceFile& measured, const Comparison& c) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                  "<title>Domino: predicted vs measured</title>\n<style>";
  h += kStyle;
  h += "</style>\n</head>\n<body>\n<h1>Domino: predicted vs measured</h1>\n";
  h += "<div class=\"sub\">" + html_escape(plan_line(predicted, measured)) + "<br>predicted: " +
       html_escape(predicted.path) + " · measured: " + html_escape(measured.path) + "</div>\n";
  h += "<h2>Summary</h2>\n" + summary_section(c);
  h += "<h2>Timeline: predicted over measured, per rank and stream</h2>\n";
  h += "<p>Both sides start at 0. Hover an op for its id and durations. * a rank-0-only prediction drawn for "
       "every rank.</p>\n";
  h += legend(predicted, measured);
  h += "<div class=\"scroll\">" + gantt_svg(predicted, measured, c) + "</div>\n";
  h += "<h2>Duration error by op kind</h2>\n<p>|measured - predicted| / predicted per op.</p>\n";
  h += kind_error_svg(c) + kind_table(c);
  h += "<h2>Ops that explain the iteration-time error</h2>\n" + top_ops_table(c);
  h += "<h2>Critical paths and unmatched ops</h2>\n";
  h += id_list("critical path, predicted", c.predicted.critical_path);
  h += id_list("critical path, measured", c.measured.critical_path);
  h += id_list("ops only in the prediction", c.only_in_predicted);
  h += id_list("ops only in the measurement", c.only_in_measured);
  h += "<h2>Plan and model</h2>\n";
  h += "<h3>predicted</h3><pre>" + html_escape(predicted.meta.dump(2)) + "</pre>\n";
  h += "<h3>measured</h3><pre>" + html_escape(measured.meta.dump(2)) + "</pre>\n";
  h += "</body>\n</html>\n";
  return h;
}

void write_html_report(const std::string& path, const TraceFile& predicted, const TraceFile& measured,
                       const Comparison& c) {
  write_file_atomic(path, render_html_report(predicted, measured, c));
}

}  // namespace domino
