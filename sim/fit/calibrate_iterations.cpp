// calibrate_iterations.cpp: every timed iteration of a measured trace that carries them
// (domino.iteration_spans, domino-exec --trace-iterations), for the fits whose samples one iteration holds
// too few of: its events per iteration, and each collective's duration and overlap with compute per
// iteration.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sim/base/error.hpp"
#include "sim/fit/calibrate_terms.hpp"

namespace domino::prof::calibration {

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

std::map<int, std::vector<CollectiveRun>> collective_runs(
    const std::vector<std::vector<TraceEvent>>& iterations) {
  std::map<int, std::vector<CollectiveRun>> out;
  for (const std::vector<TraceEvent>& events : iterations) {
    std::map<int32_t, Intervals> compute;  // rank -> its compute spans
    for (const TraceEvent& e : events)
      if (e.stream == 0) compute[e.rank].push_back({e.start_us, e.start_us + e.dur_us});
    std::map<int, CollectiveRun> fastest;  // op index -> the rank that took least
    for (const TraceEvent& e : events) {
      if (e.stream != 1 || !e.args.contains("op") || !e.args["op"].is_number_integer()) continue;
      const double overlap = busy_time(compute[e.rank], e.start_us, e.start_us + e.dur_us);
      const auto [at, fresh] =
          fastest.emplace(int(e.args["op"].get<int64_t>()), CollectiveRun{e.dur_us, overlap});
      if (!fresh && e.dur_us < at->second.dur) at->second = {e.dur_us, overlap};
    }
    for (const auto& [index, run] : fastest) out[index].push_back(run);
  }
  return out;
}

}  // namespace domino::prof::calibration
