// drift_reference.hpp: GEMM probes corrected for the machine's drift. On a shared virtual machine the speed
// of a core moves by 10-30 % over seconds to minutes (another tenant, the host's clock), and a probe timed in
// a slow stretch records its shape as slow for good: two profiles of the same machine minutes apart disagreed
// by up to 40 % on single GEMM shapes (docs/fidelity.md, "GEMM probes against a drift reference"). A small
// reference GEMM timed right before every probe and once more at the end of each pass tells the machine's
// speed at that moment; each probe's samples are scaled by the stage's median reference time over the mean
// of the two references around it.
#pragma once

#include <memory>
#include <vector>

#include "executor/profiler/probe_runner.hpp"

namespace domino::prof {

// The reference's product: about 0.4 ms on a CPU core, long enough that its time is the core's speed, not
// the dispatch's, short enough to add little (a profile of cpu-gpt and cpu-llama: 157-166 s with it, 150-160
// s without).
constexpr int64_t kDriftReferenceSide = 256;

// The factor for each of a pass's probes: `references_us` holds the reference time before each probe and one
// after the last (probes + 1 values, all positive); `stage_median_us` the median reference time of the
// whole stage. Factor j = stage_median_us / mean(references_us[j], references_us[j + 1]). Throws where a
// reference is not positive or fewer than two are given.
std::vector<double> drift_factors(const std::vector<double>& references_us, double stage_median_us);

// A stage's timings: each probe's samples of each pass, and the drift reference's times around them.
struct StageTimings {
  std::vector<std::vector<std::vector<double>>> samples;  // [pass][probe]
  // [pass]: before each probe, then after the last; empty: no reference was timed
  std::vector<std::vector<double>> references;
};

// Each probe's samples pooled over the passes, every pass's scaled by drift_factors against the median of
// all the stage's reference times (as timed where there are no references).
std::vector<std::vector<double>> pooled_samples(const StageTimings& t);

// A GEMM stage whose references spread wider than this (p90 over p10) ran on a machine too unsteady for the
// correction: on the development VM such a profile (references 0.58-1.43 of their median; 0.92-1.29 in the
// profiles beside it) had its GEMM shapes at 0.51-0.71 of the next profile's (p10-p90), where the steady
// profiles agreed within 0.95-1.02, and the plans it predicted scored GEMMs 13-15 % per op, 6-8 % on a steady
// profile (docs/fidelity.md, "A profile measured while the machine was unsteady").
constexpr double kSteadyDriftSpread = 1.6;

// How far the machine drifted over a stage: the references' times over their median, p10 and p90.
struct DriftSpread {
  double p10 = 1, p90 = 1;
  int timings = 0;
  bool steady() const { return p90 <= kSteadyDriftSpread * p10; }
};
DriftSpread drift_spread(const std::vector<double>& all_references_us);

// The reference probe of one rank: prepared once, timed as often as the stage asks.
class DriftReference {
 public:
  explicit DriftReference(std::unique_ptr<PreparedProbe> probe) : probe_(std::move(probe)) {}
  // The median of a few timings of the reference, after one untimed run.
  double time_us();

 private:
  std::unique_ptr<PreparedProbe> probe_;
};

}  // namespace domino::prof
