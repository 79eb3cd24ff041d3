// profiler_drift_test.cpp: the GEMM probes' drift correction: factors from the reference times around each
// probe, pooled samples that no longer carry a drift the reference saw, the spread the profile's notes
// report, and inputs that cannot be corrected refused.
#include <gtest/gtest.h>

#include <cmath>

#include "executor/profiler/drift_reference.hpp"
#include "sim/base/error.hpp"

namespace domino::prof {
namespace {

TEST(DriftReference, FactorIsTheStageMedianOverTheReferencesAroundTheProbe) {
  const std::vector<double> f = drift_factors({100, 100, 120, 80}, 100);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_DOUBLE_EQ(f[0], 1.0);          // 100 and 100 around it
  EXPECT_DOUBLE_EQ(f[1], 100.0 / 110);  // the machine slowed during it
  EXPECT_DOUBLE_EQ(f[2], 1.0);          // 120 and 80: the mean
}

// A machine whose speed drifts linearly between the moments the reference is timed, by up to 35 % within a
// pass: three probes of true times 50, 400 and 1000 us in three passes, the reference (400 us at speed 1)
// timed before each probe and after the last. A probe runs at the mean of the speeds at its two ends.
TEST(DriftReference, PooledSamplesLoseTheDriftTheReferenceSaw) {
  const std::vector<double> truth = {50, 400, 1000};
  // slowness at the reference points of each pass; their median over the stage is 1
  const std::vector<std::vector<double>> slowness = {
      {1.0, 1.35, 1.1, 1.0}, {1.2, 1.0, 1.0, 1.0}, {1.0, 1.3, 1.0, 1.0}};
  StageTimings t;
  for (const auto& ends : slowness) {
    t.samples.emplace_back();
    t.references.emplace_back();
    for (double s : ends) t.references.back().push_back(400 * s);
    for (size_t j = 0; j < truth.size(); ++j) {
      const double s = (ends[j] + ends[j + 1]) / 2;
      t.samples.back().push_back({truth[j] * s, truth[j] * s * 1.01});
    }
  }
  // Uncorrected, the second probe's first pass took 1.225x its time.
  ASSERT_NEAR(t.samples[0][1][0] / truth[1], 1.225, 1e-12);
  const std::vector<std::vector<double>> pooled = pooled_samples(t);
  ASSERT_EQ(pooled.size(), truth.size());
  for (size_t j = 0; j < truth.size(); ++j) {
    ASSERT_EQ(pooled[j].size(), 6u);
    for (size_t i = 0; i < pooled[j].size(); ++i)
      EXPECT_NEAR(pooled[j][i], truth[j] * (i % 2 ? 1.01 : 1.0), 1e-9 * truth[j]) << "probe " << j;
  }
}

TEST(DriftReference, WithoutReferencesTheSamplesAreKeptAsTimed) {
  StageTimings t;
  t.samples = {{{10, 11}, {20}}, {{12}, {21, 22}}};
  const std::vector<std::vector<double>> pooled = pooled_samples(t);
  EXPECT_EQ(pooled, (std::vector<std::vector<double>>{{10, 11, 12}, {20, 21, 22}}));
}

TEST(DriftReference, SpreadIsTheReferencesOverTheirMedian) {
  const DriftSpread d = drift_spread({100, 100, 100, 100, 100, 100, 100, 100, 130, 70});
  EXPECT_EQ(d.timings, 10);
  EXPECT_LT(d.p10, 1.0);
  EXPECT_GT(d.p90, 1.0);
  EXPECT_LE(d.p90, 1.3);
  EXPECT_EQ(drift_spread({}).timings, 0);
  EXPECT_TRUE(d.steady());
  EXPECT_TRUE(drift_spread({}).steady());
}

// The spreads of the development VM's profiles: 0.93-1.29 of the median is steady, 0.58-1.43 is not (the
// profile whose GEMM shapes were off by tens of percent).
TEST(DriftReference, AWideSpreadIsUnsteady) {
  const auto spread_of = [](double low, double high) {
    std::vector<double> times(14, 100.0);  // 20 in all: p10 and p90 fall inside the three lows and highs
    times.insert(times.end(), {100 * low, 100 * low, 100 * low, 100 * high, 100 * high, 100 * high});
    return drift_spread(times);
  };
  EXPECT_TRUE(spread_of(0.93, 1.29).steady());
  const DriftSpread wide = spread_of(0.58, 1.43);
  EXPECT_NEAR(wide.p10, 0.58, 1e-9);
  EXPECT_NEAR(wide.p90, 1.43, 1e-9);
  EXPECT_FALSE(wide.steady());
}

TEST(DriftReference, ReferencesThatDoNotBracketTheProbesAreRefused) {
  EXPECT_THROW(drift_factors({100}, 100), Error);
  EXPECT_THROW(drift_factors({100, 100}, 0), Error);
  EXPECT_THROW(drift_factors({100, 0}, 100), Error);
  StageTimings t;
  t.samples = {{{10}, {20}}};
  t.references = {{100, 100}};  // two probes need three references
  EXPECT_THROW(pooled_samples(t), Error);
  t.references = {{100, 100, 100}, {100}};  // references for a pass that has no samples
  EXPECT_THROW(pooled_samples(t), Error);
}

}  // namespace
}  // namespace domino::prof
