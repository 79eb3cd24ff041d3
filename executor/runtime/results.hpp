// results.hpp: what ranks report after their iterations and how rank 0 turns all ranks' reports into the
// measured Timeline (Chrome trace via write_trace) and the summary JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "executor/runtime/rank_runner.hpp"
#include "sim/base/percentile.hpp"
#include "sim/trace/timeline.hpp"

namespace domino {

std::string rank_result_to_text(const RankResult& r);
RankResult rank_result_from_text(const std::string& text);  // BadInput when malformed

struct RunSummary {
  Timeline timeline;                // spans of the median iteration, all ranks
  std::vector<float> losses;        // rank 0, every iteration (warm-up included)
  int warmup = 0;
  // Over the timed iterations; the mean is what training's throughput divides by.
  double mean_us = 0, median_us = 0, p10_us = 0, p90_us = 0;
  // [rank, ascending][timed iteration]: the summed durations of the rank's compute-stream ops. How fast that
  // rank computed in that iteration: a CPU's speed drifts between iterations (docs/fidelity.md), and the
  // fidelity sweep's noise floor takes it out with these.
  std::vector<std::vector<double>> compute_busy_us;
  // Per timed iteration, how long after the earliest rank the latest started it (ranks on one clock only;
  // empty otherwise): a rank descheduled as it leaves the barrier delays the others at their first
  // collective, noise that lands on some iterations of some plans.
  std::vector<double> start_skew_us;
  // Per rank, ascending: bytes of its buffers on huge pages (-1: unknown); beside peak_memory_bytes it says
  // how much of a rank's memory ran at huge-page speed.
  std::vector<int64_t> huge_page_bytes;
};

// Iteration time = the latest end over ranks of that iteration's ops (every rank starts after a barrier).
// The timeline's spans are those of the timed iteration whose time is the median, on one clock where the
// ranks read one (Timeline::rank_start_offsets_us); each carries its op's duration spread over all timed
// iterations of its rank. Runtime error when a span names an op that `schedule` does not have.
// With `every_iteration`, the timeline also holds every timed iteration's spans (Timeline::iteration_spans).
RunSummary summarize(const std::vector<RankResult>& ranks, const Schedule& schedule,
                     bool every_iteration = false);

nlohmann::json summary_json(const RunSummary& summary, const Schedule& schedule, const nlohmann::json& meta);

}  // namespace domino
