// calibrate_iterations.cpp: each collective's duration and overlap with compute in every timed iteration of
// a measured trace (trace_iterations.hpp), for the fits whose samples one iteration holds too few of.
#include <map>
#include <vector>

#include "sim/fit/calibrate_terms.hpp"

namespace domino::prof::calibration {

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
