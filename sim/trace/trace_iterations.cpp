// trace_iterations.cpp: a measured trace's events per timed iteration (trace_iterations.hpp).
#include "sim/trace/trace_iterations.hpp"

#include <map>
#include <string>
#include <utility>

#include "sim/base/error.hpp"

namespace domino {

std::vector<std::vector<TraceEvent>> every_iteration(const TraceFile& trace) {
  const auto it = trace.meta.find("iteration_spans");
  if (it == trace.meta.end()) return {};
  std::map<std::pair<int64_t, int64_t>, const TraceEvent*> by_rank_op;
  for (const TraceEvent& e : trace.events)
    if (e.args.contains("op") && e.args["op"].is_number_integer())
      by_rank_op[{e.rank, e.args["op"].get<int64_t>()}] = &e;
  const auto bad = [&](const std::string& why) {
    throw_bad_input(trace.path + ": domino.iteration_spans: " + why);
  };
  if (!it->is_array()) bad("not an array (one array of [rank, op, start_us, end_us] per timed iteration)");
  std::vector<std::vector<TraceEvent>> out;
  for (const nlohmann::json& spans : *it) {
    if (!spans.is_array()) bad("iteration " + std::to_string(out.size()) + " is not an array of spans");
    std::vector<TraceEvent>& events = out.emplace_back();
    for (const nlohmann::json& row : spans) {
      if (!row.is_array() || row.size() != 4 || !row[0].is_number_integer() || !row[1].is_number_integer() ||
          !row[2].is_number() || !row[3].is_number() || !(row[3].get<double>() >= row[2].get<double>()))
        bad("a span of iteration " + std::to_string(out.size() - 1) +
            " is not [rank, op, start_us, end_us]: " + row.dump());
      const auto e = by_rank_op.find({row[0].get<int64_t>(), row[1].get<int64_t>()});
      if (e == by_rank_op.end())
        bad("span " + row.dump() + " names a rank and op the trace's events do not have");
      TraceEvent& copy = events.emplace_back(*e->second);
      copy.start_us = row[2].get<double>();
      copy.dur_us = row[3].get<double>() - copy.start_us;
    }
  }
  return out;
}

bool ranks_share_a_clock(const TraceFile& trace) {
  const auto clocks = trace.meta.find("rank_clocks");
  return clocks == trace.meta.end() || *clocks != "per-rank";
}

}  // namespace domino
