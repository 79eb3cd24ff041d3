// calibrate_skew_test.cpp: `--fit sync_growth` on constructed two-rank traces: where rank 1 drifts behind
// the median rank by a + b x the compute between collectives, the fit recovers a (sync_us) and b
// (sync_per_compute); where the drift is constant, b is 0 and sync_us the constant; where it is noise about
// the compute, b stays 0. `--fit sync` alone keeps the mean as the whole skew, over the collectives the ranks
// reach apart (one queued behind another is aligned, and left out). The skew is the last rank's arrival minus
// the median rank's (half the two ranks' spread).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "sim/fit/calibrate.hpp"
#include "sim/fit/calibrate_terms.hpp"
#include "tests/compare/trace_builders.hpp"
#include "tests/sim/calibration_profile.hpp"

namespace domino::prof {
namespace {

// Rounds of: compute of c_i us on both ranks (rank 1 runs it 2 wait(c_i) slower), then an AllReduce of 500 us
// that rank 0 reaches first and waits 2 wait(c_i) in; both leave it together. The median of two ranks is
// halfway between them, so the last rank arrives wait(c_i) after it: the skew the fits are to recover.
TraceFile drifting_trace(const std::vector<double>& compute_us, const std::function<double(double)>& wait) {
  TraceFile trace;
  trace.path = "drifting.json";
  trace.meta = {{"tp", 2}};
  double now = 0;
  int op = 0;
  for (double c : compute_us) {
    const double s = 2 * wait(c), own = 500;
    trace.events.push_back(test::op_event(0, 0, op, "elementwise", now, c, 1e6));
    trace.events.push_back(test::op_event(1, 0, op, "elementwise", now, c + s, 1e6));
    ++op;
    trace.events.push_back(test::op_event(0, 1, op, "allreduce", now + c, own + s, 4e5));
    trace.events.push_back(test::op_event(1, 1, op, "allreduce", now + c + s, own, 4e5));
    ++op;
    now += c + s + own;
  }
  return trace;
}

const std::vector<double> kCompute = {1000, 6000, 2500, 8000, 4000, 3000, 7000, 1500};

CalibrationResult fit_sync(const TraceFile& trace, double old_rate = 0, const std::string& parts = "sync_growth") {
  Profile base = test::calibration_profile("base");
  base.intra_node.sync_us = 50;
  base.intra_node.sync_per_compute = old_rate;
  return calibrate_profile(base, trace, 0, parse_calibration_scope(parts));
}

TEST(CalibrateArrivalSkew, SamplesCarryTheEarlyRanksComputeBetweenCollectives) {
  const TraceFile trace = drifting_trace(kCompute, [](double c) { return 300 + 0.2 * c; });
  const calibration::TraceSamples in(test::calibration_profile("base"), trace, 0);
  size_t i = 0;
  for (const calibration::Sample& s : in.samples) {
    if (s.op.kind != OpKind::AllReduce) {
      EXPECT_EQ(s.compute_between, -1);
      continue;
    }
    ASSERT_LT(i, kCompute.size());
    EXPECT_NEAR(s.compute_between, kCompute[i], 1e-9);  // rank 0's, not the slower rank 1's
    EXPECT_NEAR(s.skew, 300 + 0.2 * kCompute[i], 1e-9);
    ++i;
  }
  EXPECT_EQ(i, kCompute.size());
}

TEST(CalibrateArrivalSkew, SkewGrowingWithTheComputeIsRecovered) {
  const CalibrationResult r = fit_sync(drifting_trace(kCompute, [](double c) { return 300 + 0.2 * c; }));
  EXPECT_NEAR(r.profile.intra_node.sync_us, 300, 1e-6);
  EXPECT_NEAR(r.profile.intra_node.sync_per_compute, 0.2, 1e-9);
  EXPECT_NE(r.report.find("sync_per_compute 0 -> 0.2"), std::string::npos) << r.report;
  // The collective's own figures are not in the scope.
  EXPECT_EQ(r.profile.intra_node.latency_us, 60.0);
}

TEST(CalibrateArrivalSkew, ConstantSkewGivesNoGrowth) {
  const CalibrationResult r = fit_sync(drifting_trace(kCompute, [](double) { return 900; }), 0.3);
  EXPECT_NEAR(r.profile.intra_node.sync_us, 900, 1e-6);
  EXPECT_EQ(r.profile.intra_node.sync_per_compute, 0);  // an earlier rate is replaced, not kept
  EXPECT_NE(r.report.find("(mean over 8 ops)"), std::string::npos) << r.report;
}

TEST(CalibrateArrivalSkew, SyncAloneTakesTheMeanEvenWhereTheSkewGrows) {
  const auto skew = [](double c) { return 300 + 0.2 * c; };
  const CalibrationResult r = fit_sync(drifting_trace(kCompute, skew), 0.3, "sync");
  double sum = 0;
  for (double c : kCompute) sum += skew(c);
  EXPECT_NEAR(r.profile.intra_node.sync_us, sum / double(kCompute.size()), 1e-6);
  EXPECT_EQ(r.profile.intra_node.sync_per_compute, 0);  // the mean is the whole skew
  EXPECT_NE(r.report.find("sync_per_compute 0.3 -> 0"), std::string::npos) << r.report;
}

// Seven timed iterations in which the ranks drift apart by 0 to 1000 us at every collective (which rank runs
// slower changes from one iteration to the next on a shared host): sync_us is the median iteration's mean
// skew, 200, not that of the iteration the events show (100).
TEST(CalibrateArrivalSkew, SyncAloneIsTheMedianIterationsSkewWhereTheTraceHoldsEveryIteration) {
  TraceFile trace = drifting_trace(kCompute, [](double) { return 100.0; });
  nlohmann::json spans = nlohmann::json::array();
  for (double w : {0.0, 0.0, 200.0, 1000.0, 50.0, 400.0, 300.0})
    spans.push_back(test::iteration_spans_of(drifting_trace(kCompute, [w](double) { return w; }).events));
  trace.meta["iteration_spans"] = spans;
  const CalibrationResult r = fit_sync(trace, 0.3, "sync");
  EXPECT_NEAR(r.profile.intra_node.sync_us, 200, 1e-6);
  EXPECT_EQ(r.profile.intra_node.sync_per_compute, 0);
  EXPECT_NE(r.report.find("(median over 7 iterations of the mean over 8 ops)"), std::string::npos)
      << r.report;
  // Ranks on clocks of their own: their iterations' arrivals do not compare, the events' iteration (whose
  // ranks the calibration puts on one clock by their collectives' ends) does.
  TraceFile apart = trace;
  apart.meta["rank_clocks"] = "per-rank";
  EXPECT_NEAR(fit_sync(apart, 0, "sync").profile.intra_node.sync_us, 100, 1e-6);
  // Four iterations are too few to stand for the launch: the events' iteration, as without them.
  spans.erase(spans.begin(), spans.begin() + 3);
  trace.meta["iteration_spans"] = spans;
  EXPECT_NEAR(fit_sync(trace, 0, "sync").profile.intra_node.sync_us, 100, 1e-6);
  // The growth is fitted on the events' iteration, whose compute between collectives it needs.
  EXPECT_NEAR(fit_sync(trace, 0, "sync_growth").profile.intra_node.sync_us, 100, 1e-6);
}

TEST(CalibrateArrivalSkew, GrowthIsFittedOnlyWhenNamed) {
  EXPECT_FALSE(parse_calibration_scope("all").sync_growth);
  EXPECT_FALSE(CalibrationScope{}.sync_growth);
  const CalibrationScope growth = parse_calibration_scope("sync_growth");
  EXPECT_TRUE(growth.sync_growth && growth.sync);
  EXPECT_FALSE(growth.memory || growth.allreduce || growth.interference);
}

TEST(CalibrateArrivalSkew, ANegativeInterceptIsRefittedThroughTheOrigin) {
  // Pure drift with a little curvature: the free line's intercept falls below 0.
  const CalibrationResult r = fit_sync(drifting_trace(kCompute, [](double c) { return 1e-5 * c * c; }));
  EXPECT_EQ(r.profile.intra_node.sync_us, 0);
  EXPECT_GT(r.profile.intra_node.sync_per_compute, 0);
  EXPECT_LE(r.profile.intra_node.sync_per_compute, 1);
}

TEST(CalibrateArrivalSkew, SkewThatIsNoiseAboutTheComputeStaysConstant) {
  // Alternating 400 and 1600 us whatever the compute: no slope told from noise, the mean is the constant.
  int k = 0;
  const CalibrationResult r =
      fit_sync(drifting_trace({1000, 1200, 5000, 5200, 3000, 3100, 8000, 7900}, [&k](double) {
        return k++ % 2 == 0 ? 400.0 : 1600.0;
      }));
  EXPECT_EQ(r.profile.intra_node.sync_per_compute, 0);
  EXPECT_NEAR(r.profile.intra_node.sync_us, 1000, 1e-6);
  EXPECT_NE(r.report.find("beyond noise"), std::string::npos) << r.report;
}

TEST(CalibrateArrivalSkew, CollectivesAllAfterTheSameComputeKeepTheConstant) {
  const CalibrationResult r = fit_sync(drifting_trace({4000, 4000, 4000, 4000}, [](double) { return 700; }));
  EXPECT_EQ(r.profile.intra_node.sync_per_compute, 0);
  EXPECT_NEAR(r.profile.intra_node.sync_us, 700, 1e-6);
  EXPECT_NE(r.report.find("hardly differ"), std::string::npos) << r.report;
}

// drifting_trace's rounds with deps, and behind each AllReduce a second one of 300 us that waits on the
// same compute: the ranks start it together, as they leave the first.
TraceFile trace_with_queued_collectives(const std::vector<double>& compute_us, double wait) {
  TraceFile trace = drifting_trace(compute_us, [wait](double) { return wait; });
  std::vector<TraceEvent> events;
  int op = 0;
  for (size_t i = 0; i < trace.events.size(); i += 4) {
    const int compute = op, first = op + 1, queued = op + 2;
    for (size_t r = 0; r < 4; ++r) {
      TraceEvent e = trace.events[i + r];
      e.args["op"] = r < 2 ? compute : first;
      if (r >= 2) e.args["deps"] = {compute};
      events.push_back(e);
    }
    const double end = trace.events[i + 2].start_us + trace.events[i + 2].dur_us;
    for (int rank : {0, 1}) {
      TraceEvent e = test::op_event(rank, 1, queued, "allreduce", end, 300, 4e5);
      e.args["deps"] = {compute};
      events.push_back(e);
    }
    op += 3;
  }
  trace.events = events;
  return trace;
}

TEST(CalibrateArrivalSkew, CollectivesQueuedBehindAnotherAreAlignedAndLeftOutOfTheSkew) {
  const TraceFile trace = trace_with_queued_collectives(kCompute, 800);
  const calibration::TraceSamples in(test::calibration_profile("base"), trace, 0);
  int aligned = 0, apart = 0;
  for (const calibration::Sample& s : in.samples) {
    if (s.op.kind != OpKind::AllReduce) continue;
    EXPECT_EQ(s.op.stream, Stream::Comm);
    (s.aligned ? aligned : apart)++;
    EXPECT_NEAR(s.skew, s.aligned ? 0 : 800, 1e-9);
  }
  EXPECT_EQ(aligned, int(kCompute.size()));
  EXPECT_EQ(apart, int(kCompute.size()));
  // The mean over the collectives the ranks reach apart, not diluted by the queued ones' zeros.
  const CalibrationResult r = fit_sync(trace, 0, "sync");
  EXPECT_NEAR(r.profile.intra_node.sync_us, 800, 1e-6);
  EXPECT_NE(r.report.find("(mean over 8 ops)"), std::string::npos) << r.report;
  // Without deps the trace cannot tell: every collective counts, as before traces carried them.
  TraceFile without = trace;
  for (TraceEvent& e : without.events) e.args.erase("deps");
  EXPECT_NEAR(fit_sync(without, 0, "sync").profile.intra_node.sync_us, 400, 1e-6);
}

}  // namespace
}  // namespace domino::prof
