// compare_output.cpp: what domino-compare writes besides the HTML report: the --json figures (stable
// keys, documented in docs/compare.md), the printed table, and the merged Chrome trace.
#include <fmt/format.h>

#include <cmath>
#include <set>

#include "sim/compare/compare.hpp"

namespace domino {
namespace {

using nlohmann::json;

// A figure that is -1 when not known (an unscored error, a spread the trace does not have) as null.
json known_or_null(double v) { return v < 0 ? json(nullptr) : json(v); }

std::string first_ids(const std::vector<std::string>& ids, size_t n) {
  std::string s;
  for (size_t i = 0; i < ids.size() && i < n; ++i) s += (i ? ", " : "") + ids[i];
  if (ids.size() > n) s += ", ...";
  return s;
}

}  // namespace

json comparison_json(const Comparison& c) {
  json j;
  j["mode"] = c.mode;
  j["predicted_trace"] = c.predicted.path;
  j["measured_trace"] = c.measured.path;
  j["iteration_time_predicted_us"] = c.predicted.iteration_us;
  j["iteration_time_measured_us"] = c.measured.iteration_us;
  j["iteration_time_error_pct"] = c.iteration_error_pct;
  j["iteration_time_from"] = {{"predicted", c.predicted.iteration_from}, {"measured", c.measured.iteration_from}};
  j["op_error_median_pct"] = c.op_error_median_pct;
  j["op_error_p90_pct"] = c.op_error_p90_pct;
  j["op_spread_median_pct"] = known_or_null(c.op_spread_median_pct);
  j["measured_durations"] = c.measured_durations;
  j["scored_ops"] = c.scored_ops;
  j["by_kind"] = json::object();
  for (const KindError& k : c.by_kind)
    j["by_kind"][k.kind] = {{"median_pct", k.median_pct}, {"p90_pct", k.p90_pct}, {"count", k.count},
                            {"spread_pct", known_or_null(k.spread_pct)}};
  j["arrival_wait_by_phase"] = json::object();
  for (const PhaseWaits& w : c.waits_by_phase)
    j["arrival_wait_by_phase"][w.phase] = {{"count", w.count},
                                           {"predicted_mean_us", w.predicted_mean_us},
                                           {"measured_mean_us", w.measured_mean_us}};
  j["comm_busy_us"] = {{"predicted", c.predicted.comm_busy_us}, {"measured", c.measured.comm_busy_us}};
  j["exposed_comm_us"] = {{"predicted", c.predicted.exposed_comm_us}, {"measured", c.measured.exposed_comm_us}};
  j["overlap_fraction"] = {{"predicted", c.predicted.overlap_fraction}, {"measured", c.measured.overlap_fraction}};
  j["only_in_predicted"] = c.only_in_predicted;
  j["only_in_measured"] = c.only_in_measured;
  j["top_error_ops"] = json::array();
  for (const OpComparison& op : c.top_error_ops) {
    json row = {{"id", op.id},
                {"kind", op.kind},
                {"predicted_us", op.predicted_us},
                {"measured_us", op.measured_us},
                {"delta_us", op.delta_us()},
                {"measured_p10_us", known_or_null(op.measured_p10_us)},
                {"measured_p90_us", known_or_null(op.measured_p90_us)},
                {"error_pct", known_or_null(op.error_pct)},
                {"on_critical_path", op.on_critical_path}};
    if (op.predicted_wait_us >= 0)
      row["arrival_wait_us"] = {{"predicted", op.predicted_wait_us}, {"measured", op.measured_wait_us}};
    j["top_error_ops"].push_back(std::move(row));
  }
  j["critical_path"] = {{"predicted", c.predicted.critical_path}, {"measured", c.measured.critical_path},
                        {"predicted_rank", c.predicted.critical_rank}, {"measured_rank", c.measured.critical_rank}};
  j["warnings"] = c.warnings;
  return j;
}

std::string comparison_table(const Comparison& c) {
  std::string s;
  s += fmt::format("predicted: {}\nmeasured:  {}\nops aligned by id, {}\n\n", c.predicted.path, c.measured.path, c.mode);
  s += fmt::format("{:<24}{:>12}{:>12}{:>10}\n", "", "predicted", "measured", "error");
  s += fmt::format("{:<24}{:>12.1f}{:>12.1f}{:>+9.1f}%\n", "iteration time (us)", c.predicted.iteration_us,
                   c.measured.iteration_us, c.iteration_error_pct);
  s += fmt::format("{:<24}{:>12.1f}{:>12.1f}\n", "communication (us)", c.predicted.comm_busy_us, c.measured.comm_busy_us);
  s += fmt::format("{:<24}{:>12.1f}{:>12.1f}\n", "exposed comm (us)", c.predicted.exposed_comm_us, c.measured.exposed_comm_us);
  s += fmt::format("{:<24}{:>12.3f}{:>12.3f}\n", "overlap fraction", c.predicted.overlap_fraction, c.measured.overlap_fraction);
  s += fmt::format("{:<24}{:>12}{:>12}\n", "critical path (ops)", c.predicted.critical_path.size(), c.measured.critical_path.size());
  s += fmt::format("\nop duration error |m-p|/p: median {:.1f}%, p90 {:.1f}% over {} ops\n", c.op_error_median_pct,
                   c.op_error_p90_pct, c.scored_ops);
  s += fmt::format("measured duration of an op: {}\n", c.measured_durations);
  const bool spread = c.op_spread_median_pct >= 0;
  if (spread)
    s += fmt::format("spread: half the p10-p90 width of an op's iterations over its median (median {:.1f}%): an error "
                     "below it cannot be told from noise\n", c.op_spread_median_pct);
  s += fmt::format("  {:<14}{:>6}{:>10}{:>10}{}\n", "kind", "ops", "median", "p90", spread ? "    spread" : "");
  for (const KindError& k : c.by_kind)
    s += fmt::format("  {:<14}{:>6}{:>9.1f}%{:>9.1f}%{}\n", k.kind, k.count, k.median_pct, k.p90_pct,
                     !spread ? "" : k.spread_pct < 0 ? "         -" : fmt::format("{:>9.1f}%", k.spread_pct));
  if (!c.waits_by_phase.empty()) {
    s += "collectives' wait for the last rank, mean per collective (predicted / measured us):";
    for (const PhaseWaits& w : c.waits_by_phase)
      s +=
          fmt::format(" {} {:.0f} / {:.0f} ({});", w.phase, w.predicted_mean_us, w.measured_mean_us, w.count);
    s.back() = '\n';
  }
  s += fmt::format("\nops only in predicted: {}{}\n", c.only_in_predicted.size(),
                   c.only_in_predicted.empty() ? "" : " (" + first_ids(c.only_in_predicted, 5) + ")");
  s += fmt::format("ops only in measured:  {}{}\n", c.only_in_measured.size(),
                   c.only_in_measured.empty() ? "" : " (" + first_ids(c.only_in_measured, 5) + ")");
  if (!c.top_error_ops.empty()) {
    s += fmt::format("\ntop error ops (* = on a critical path)\n  {:<36}{:>11}{:>11}{:>10}  {}\n", "op", "pred us",
                     "meas us", "delta", "meas p10-p90 us");
    for (const OpComparison& op : c.top_error_ops) {
      const std::string band =
          op.measured_p10_us < 0 ? "" : fmt::format("{:.0f}-{:.0f}", op.measured_p10_us, op.measured_p90_us);
      const std::string wait = op.predicted_wait_us < 0
                                   ? ""
                                   : fmt::format("  wait {:.0f} us predicted, {:.0f} measured",
                                                 op.predicted_wait_us, op.measured_wait_us);
      s += fmt::format("  {:<36}{:>11.1f}{:>11.1f}{:>+10.1f}{:>2} {}{}\n", op.id, op.predicted_us,
                       op.measured_us, op.delta_us(), op.on_critical_path ? "*" : "", band, wait);
    }
  }
  for (const std::string& w : c.warnings) s += "warning: " + w + "\n";
  return s;
}

json merged_trace_json(const TraceFile& predicted, const TraceFile& measured) {
  json events = json::array();
  const TraceFile* sides[2] = {&predicted, &measured};
  const char* labels[2] = {"predicted", "measured"};
  for (int side = 0; side < 2; ++side) {
    const TraceFile& t = *sides[side];
    auto pid_of = [side](int64_t rank) { return rank * 2 + side; };
    std::set<int> ranks;
    for (const TraceEvent& e : t.events) {
      ranks.insert(e.rank);
      events.push_back({{"name", e.id}, {"cat", e.kind}, {"ph", "X"}, {"ts", e.start_us}, {"dur", e.dur_us},
                        {"pid", pid_of(e.rank)}, {"tid", e.stream}, {"args", e.args}});
    }
    for (json e : t.other_events) {
      if (e.contains("pid") && e["pid"].is_number_integer()) e["pid"] = pid_of(e["pid"].get<int64_t>());
      // Flow ids must not pair a predicted start with a measured finish.
      if (e.contains("id")) {
        if (e["id"].is_number_integer()) e["id"] = e["id"].get<int64_t>() * 2 + side;
        else e["id"] = std::string(labels[side]) + ":" + (e["id"].is_string() ? e["id"].get<std::string>() : e["id"].dump());
      }
      events.push_back(std::move(e));
    }
    for (int rank : ranks) {
      const std::string name = "rank " + std::to_string(rank) + " (" + labels[side] + ")";
      events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid_of(rank)}, {"args", {{"name", name}}}});
      events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid_of(rank)}, {"args", {{"sort_index", pid_of(rank)}}}});
      for (int tid = 0; tid < 2; ++tid)
        events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid_of(rank)}, {"tid", tid},
                          {"args", {{"name", tid == 0 ? "compute" : "communication"}}}});
    }
  }
  json doc;
  doc["traceEvents"] = std::move(events);
  doc["displayTimeUnit"] = "ns";
  doc["domino"] = {{"source", "merged"}, {"predicted", predicted.meta}, {"measured", measured.meta}};
  return doc;
}

}  // namespace domino
