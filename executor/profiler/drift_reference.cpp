// drift_reference.cpp: the drift reference and its correction factors (see drift_reference.hpp).
#include "executor/profiler/drift_reference.hpp"

#include "sim/base/error.hpp"
#include "sim/base/percentile.hpp"
#include "sim/fit/stats.hpp"

namespace domino::prof {

namespace {
// Timings per reference point: its median stands for the core's speed at that moment.
constexpr int kReferenceRepeats = 5;
}  // namespace

std::vector<double> drift_factors(const std::vector<double>& references_us, double stage_median_us) {
  if (references_us.size() < 2 || !(stage_median_us > 0))
    throw_runtime(
        "profiler: a drift correction needs a reference before and after a probe and a positive median");
  for (double us : references_us)
    if (!(us > 0)) throw_runtime("profiler: a drift reference timed at no time");
  std::vector<double> factors;
  for (size_t j = 0; j + 1 < references_us.size(); ++j)
    factors.push_back(stage_median_us / ((references_us[j] + references_us[j + 1]) / 2));
  return factors;
}

std::vector<std::vector<double>> pooled_samples(const StageTimings& t) {
  const size_t probes = t.samples.empty() ? 0 : t.samples.front().size();
  std::vector<std::vector<double>> pooled(probes);
  std::vector<double> all_references;
  for (const auto& r : t.references) all_references.insert(all_references.end(), r.begin(), r.end());
  if (!all_references.empty() && t.references.size() != t.samples.size())
    throw_runtime("profiler: drift references for " + std::to_string(t.references.size()) + " passes of " +
                  std::to_string(t.samples.size()));
  const double stage_median = all_references.empty() ? 0 : median_of(all_references);
  for (size_t pass = 0; pass < t.samples.size(); ++pass) {
    const std::vector<double> factors = all_references.empty()
                                            ? std::vector<double>(probes, 1.0)
                                            : drift_factors(t.references[pass], stage_median);
    if (factors.size() != probes || t.samples[pass].size() != probes)
      throw_runtime("profiler: a pass's drift references do not bracket its probes");
    for (size_t j = 0; j < probes; ++j)
      for (double us : t.samples[pass][j]) pooled[j].push_back(us * factors[j]);
  }
  return pooled;
}

DriftSpread drift_spread(const std::vector<double>& all_references_us) {
  if (all_references_us.empty()) return {};
  const double mid = median_of(all_references_us);
  std::vector<double> ratios;
  for (double r : all_references_us) ratios.push_back(r / mid);
  return {percentile(ratios, 0.1), percentile(ratios, 0.9), int(ratios.size())};
}

double DriftReference::time_us() {
  RepeatPolicy policy;
  policy.warmup = 1;
  policy.min_repeats = policy.max_repeats = kReferenceRepeats;
  policy.min_total_us = 0;
  return median_of(probe_->time_ops(policy));
}

}  // namespace domino::prof
