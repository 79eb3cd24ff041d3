// interleave_summary.cpp: per-plan medians and per-round ratios of an interleaved launch (see
// interleave_summary.hpp).
#include "executor/job/interleave_summary.hpp"

#include <algorithm>

#include "executor/runtime/results.hpp"
#include "sim/base/error.hpp"

namespace domino {
namespace {

struct RatioStats {
  std::vector<double> per_round;  // plan / baseline, one per round
  double median = 0, p10 = 0, p90 = 0, min = 0, max = 0;
};

// Each round's time of `plan` over the baseline's in the same round. BadInput when the two ran different
// numbers of rounds or a baseline time is not positive.
RatioStats round_ratios(const PlanTimes& plan, const PlanTimes& baseline) {
  if (plan.samples_us.size() != baseline.samples_us.size() || plan.samples_us.empty())
    throw_bad_input("plan '" + plan.label + "' ran " + std::to_string(plan.samples_us.size()) + " rounds, the baseline '" +
                    baseline.label + "' " + std::to_string(baseline.samples_us.size()) + ": no round-by-round ratio");
  RatioStats r;
  for (size_t k = 0; k < plan.samples_us.size(); ++k) {
    if (!(baseline.samples_us[k] > 0)) throw_bad_input("baseline '" + baseline.label + "' has a round of no time");
    r.per_round.push_back(plan.samples_us[k] / baseline.samples_us[k]);
  }
  r.median = percentile(r.per_round, 0.5);
  r.p10 = percentile(r.per_round, 0.1);
  r.p90 = percentile(r.per_round, 0.9);
  r.min = *std::min_element(r.per_round.begin(), r.per_round.end());
  r.max = *std::max_element(r.per_round.begin(), r.per_round.end());
  return r;
}

}  // namespace

nlohmann::json interleave_summary(const std::vector<PlanTimes>& plans, size_t baseline, const nlohmann::json& head) {
  if (baseline >= plans.size()) throw_runtime("interleave summary: no baseline plan");
  nlohmann::json out = head;
  out["rounds"] = plans[baseline].samples_us.size();
  out["baseline"] = plans[baseline].label;
  nlohmann::json rows = nlohmann::json::array();
  for (const PlanTimes& p : plans) {
    const RatioStats r = round_ratios(p, plans[baseline]);
    rows.push_back({{"label", p.label},
                    {"strategy", p.strategy},
                    {"iteration_time_us",
                     {{"mean", p.mean_us},
                      {"median", p.median_us},
                      {"p10", p.p10_us},
                      {"p90", p.p90_us},
                      {"samples", p.samples_us}}},
                    {"ratio_to_baseline",
                     {{"median", r.median},
                      {"p10", r.p10},
                      {"p90", r.p90},
                      {"min", r.min},
                      {"max", r.max},
                      {"per_round", r.per_round}}}});
  }
  out["plans"] = std::move(rows);
  return out;
}

}  // namespace domino
