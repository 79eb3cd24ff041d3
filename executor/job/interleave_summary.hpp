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
};

struct RatioStats {
  std::vector<double> per_round;  // plan / baseline, one per round
  double median = 0, p10 = 0, p90 = 0, min = 0, max = 0;
};

// Each round's time of `plan` over the baseline's in the same round. BadInput when the two ran different
// numbers of rounds or a baseline time is not positive.
RatioStats round_ratios(const PlanTimes& plan, const PlanTimes& baseline);

// {"model", "tp", "rounds", "warmup", "baseline", "plans": [{"label", "strategy", "iteration_time_us": {median,
// p10, p90, samples}, "ratio_to_baseline": {median, p10, p90, min, max, per_round}}]} (docs/fidelity.md).
nlohmann::json interleave_summary(const std::vector<PlanTimes>& plans, size_t baseline, const nlohmann::json& head);

}  // namespace domino
