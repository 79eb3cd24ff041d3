// calibrate_iteration_test.cpp: `--fit sync_iteration` (the arrival skew that reproduces a trace's iteration
// time). A megatron-sync trace predicted by the simulator with a known skew is calibrated from a profile with
// another skew: the fit must recover the skew and then predict the iteration again. A trace whose streams
// overlap, one without an iteration time, and asking for two skew fits at once are refused.
#include <gtest/gtest.h>

#include <filesystem>

#include "sim/base/error.hpp"
#include "sim/engine/simulator.hpp"
#include "sim/fit/calibrate.hpp"
#include "tests/sim/calibration_profile.hpp"

namespace domino::prof {
namespace {

struct Predicted {
  Schedule schedule;
  TraceFile trace;
  double iteration_us = 0;
};

Predicted predicted(const Profile& truth, const std::string& strategy) {
  const ModelSpec model = default_model();  // cpu-gpt, tp 2
  Predicted out{build_schedule(model, make_strategy_plan(strategy, model)), {}, 0};
  const SimResult r = simulate(out.schedule, CostModel(truth));
  out.iteration_us = r.iteration_us;
  out.trace = read_trace_string(trace_json(out.schedule, r.timeline).dump(), strategy + ".json");
  return out;
}

Profile with_skew(double sync_us) {
  Profile p = test::calibration_profile("skewed");
  p.intra_node.sync_us = sync_us;
  return p;
}

TEST(CalibrateSkewToIteration, RecoversTheSkewThatMadeTheIteration) {
  const Predicted sync = predicted(with_skew(1500), "megatron-sync");
  const CalibrationResult r =
      calibrate_profile(with_skew(50), sync.trace, 0, parse_calibration_scope("sync_iteration"));
  EXPECT_NEAR(r.profile.intra_node.sync_us, 1500, 1e-6 * 1500);
  EXPECT_NE(r.report.find("arrival skew from the iteration time"), std::string::npos) << r.report;
  // Only the skew changed, and the calibrated profile predicts the trace's iteration again.
  EXPECT_EQ(r.profile.intra_node.latency_us, with_skew(50).intra_node.latency_us);
  EXPECT_NEAR(simulate(sync.schedule, CostModel(r.profile)).iteration_us, sync.iteration_us,
              1e-6 * sync.iteration_us);
}

TEST(CalibrateSkewToIteration, AnIterationShorterThanTheOpsLeavesNoSkew) {
  Predicted sync = predicted(with_skew(0), "megatron-sync");
  sync.trace.meta["iteration_time_us"] = 0.5 * sync.iteration_us;
  const CalibrationResult r =
      calibrate_profile(with_skew(400), sync.trace, 0, parse_calibration_scope("sync_iteration"));
  EXPECT_EQ(r.profile.intra_node.sync_us, 0);
}

TEST(CalibrateSkewToIteration, RefusesWhatItCannotFit) {
  const auto refused = [](const TraceFile& trace, const std::string& expected) {
    try {
      calibrate_profile(with_skew(50), trace, 0, parse_calibration_scope("sync_iteration"));
      ADD_FAILURE() << "accepted; expected: " << expected;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadInput);
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  // domino-ds hides its AllReduces behind compute: its iteration is not the sum of its ops.
  refused(predicted(with_skew(500), "domino-ds").trace, "streams do not overlap");
  TraceFile no_time = predicted(with_skew(500), "megatron-sync").trace;
  no_time.meta.erase("iteration_time_us");
  refused(no_time, "domino.iteration_time_us");
  refused(predicted(with_skew(500), "no-comm").trace, "no collective");
  EXPECT_THROW(parse_calibration_scope("sync_growth,sync_iteration"), Error);
  EXPECT_TRUE(parse_calibration_scope("sync_iteration").sync);
  EXPECT_FALSE(parse_calibration_scope("all").sync_iteration);
}

}  // namespace
}  // namespace domino::prof
