// interleave_summary.hpp: the combined summary of an interleaved launch (domino-exec --plans): per plan its
// iteration-time median and spread, and its time relative to the baseline plan taken round by round (both
// ran within the same round, a few iterations apart, so the machine's drift divides out).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace domino {

struct PlanTimes {
  std::string label;
  std::string strategy;
  std::vector<double> samples_us;  // one per timed round, in round order
  // Of samples_us (the plan's RunSummary has them).
  double mean_us = 0, median_us = 0, p10_us = 0, p90_us = 0;
};

// {"model", "tp", "rounds", "warmup", "baseline", "plans": [{"label", "strategy", "iteration_time_us": {mean,
// median, p10, p90, samples}, "ratio_to_baseline": {median, p10, p90, min, max, per_round}}]}
// (docs/fidelity.md).
nlohmann::json interleave_summary(const std::vector<PlanTimes>& plans, size_t baseline, const nlohmann::json& head);

}  // namespace domino
