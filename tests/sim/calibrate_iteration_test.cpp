// calibrate_iteration_test.cpp: the fits to a trace's iteration time, `--fit sync_iteration` (the arrival
// skew) and `--fit stall` (the compute stream's stall), and `--fit comm_compute` (the compute's slowdown in a
// communicating iteration). A trace predicted by the simulator with a known skew, stall or slowdown is
// calibrated from a profile with another: the fit must recover it and then predict the iteration again.
// Traces they cannot fit (streams that overlap, collectives in a stall fit, none in a slowdown fit, no
// iteration time) are refused.
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

// calibrate_profile(base, trace, scope) must refuse with BadInput whose message holds `expected`.
void expect_refused(const Profile& base, const TraceFile& trace, const std::string& scope,
                    const std::string& expected) {
  try {
    calibrate_profile(base, trace, 0, parse_calibration_scope(scope));
    ADD_FAILURE() << "accepted; expected: " << expected;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
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

// With sync_growth named too, the skew's growth with the compute between collectives (no constant) is what
// makes the iteration: a trace made with a growth of 0.08 gives it back, and its iteration again.
TEST(CalibrateSkewToIteration, WithGrowthRecoversTheGrowthThatMadeTheIteration) {
  Profile truth = with_skew(0);
  truth.intra_node.sync_per_compute = 0.08;
  const Predicted sync = predicted(truth, "megatron-sync");
  const CalibrationResult r =
      calibrate_profile(with_skew(300), sync.trace, 0, parse_calibration_scope("sync_iteration,sync_growth"));
  EXPECT_EQ(r.profile.intra_node.sync_us, 0);
  EXPECT_NEAR(r.profile.intra_node.sync_per_compute, 0.08, 0.01 * 0.08) << r.report;
  EXPECT_NEAR(simulate(sync.schedule, CostModel(r.profile)).iteration_us, sync.iteration_us,
              0.002 * sync.iteration_us);
  EXPECT_NE(r.report.find("of compute between them"), std::string::npos) << r.report;
}

TEST(CalibrateSkewToIteration, RefusesWhatItCannotFit) {
  const auto refused = [](const TraceFile& trace, const std::string& expected) {
    expect_refused(with_skew(50), trace, "sync_iteration", expected);
  };
  // domino-ds hides its AllReduces behind compute: its iteration is not the sum of its ops.
  refused(predicted(with_skew(500), "domino-ds").trace, "streams do not overlap");
  TraceFile no_time = predicted(with_skew(500), "megatron-sync").trace;
  no_time.meta.erase("iteration_time_us");
  refused(no_time, "domino.iteration_time_us");
  refused(predicted(with_skew(500), "no-comm").trace, "no collective");
  EXPECT_TRUE(parse_calibration_scope("sync_iteration").sync);
  EXPECT_FALSE(parse_calibration_scope("all").sync_iteration);
}

Profile with_stall(double share) {
  Profile p = test::calibration_profile("stalled");
  p.interference.compute_stall_share = share;
  return p;
}

TEST(CalibrateStallToIteration, RecoversTheStallAndTheSkewFittedAfterIt) {
  Profile truth = with_stall(0.12);
  truth.intra_node.sync_us = 900;
  const Predicted no_comm = predicted(truth, "no-comm");
  const CalibrationResult stalled =
      calibrate_profile(with_skew(50), no_comm.trace, 0, parse_calibration_scope("stall"));
  EXPECT_NEAR(stalled.profile.interference.compute_stall_share, 0.12, 1e-9);
  EXPECT_NE(stalled.report.find("compute stall from the iteration time"), std::string::npos)
      << stalled.report;
  EXPECT_NEAR(simulate(no_comm.schedule, CostModel(stalled.profile)).iteration_us, no_comm.iteration_us,
              1e-6 * no_comm.iteration_us);
  // The skew fitted to megatron-sync's iteration next charges the compute its stall, not the skew.
  const Predicted sync = predicted(truth, "megatron-sync");
  const CalibrationResult skewed =
      calibrate_profile(stalled.profile, sync.trace, 0, parse_calibration_scope("sync_iteration"));
  EXPECT_NEAR(skewed.profile.intra_node.sync_us, 900, 1e-6 * 900);
  EXPECT_NEAR(skewed.profile.interference.compute_stall_share, 0.12, 1e-9);
}

// A measured iteration shorter than the ops' costs leaves nothing to charge: the skew and the stall become 0.
TEST(CalibrateToIteration, AnIterationShorterThanTheOpsLeavesNoSkewAndNoStall) {
  Predicted sync = predicted(with_skew(0), "megatron-sync");
  sync.trace.meta["iteration_time_us"] = 0.5 * sync.iteration_us;
  EXPECT_EQ(calibrate_profile(with_skew(400), sync.trace, 0, parse_calibration_scope("sync_iteration"))
                .profile.intra_node.sync_us,
            0);
  Predicted no_comm = predicted(with_stall(0), "no-comm");
  no_comm.trace.meta["iteration_time_us"] = 0.9 * no_comm.iteration_us;
  EXPECT_EQ(calibrate_profile(with_stall(0.3), no_comm.trace, 0, parse_calibration_scope("stall"))
                .profile.interference.compute_stall_share,
            0);
}

// Where the trace lists its timed iterations, the fit is to their mean (training's throughput), not to the
// median the trace also records: one slow iteration in four moves the mean and not the median.
TEST(CalibrateStallToIteration, FitsTheMeanOfTheTimedIterations) {
  Predicted no_comm = predicted(with_stall(0.05), "no-comm");
  const double t = no_comm.iteration_us;
  no_comm.trace.meta["iteration_samples_us"] = {0.98 * t, 1.0 * t, 1.02 * t, 1.4 * t};
  no_comm.trace.meta["iteration_time_us"] = 1.01 * t;  // the median
  const CalibrationResult r =
      calibrate_profile(with_stall(0), no_comm.trace, 0, parse_calibration_scope("stall"));
  EXPECT_NEAR(simulate(no_comm.schedule, CostModel(r.profile)).iteration_us, 1.1 * t, 1e-6 * t) << r.report;
  no_comm.trace.meta["iteration_samples_us"] = {t, -1.0};
  expect_refused(with_stall(0), no_comm.trace, "stall", "iteration_samples_us holds -1.0, not a time");
}

// A measured trace's compute stream stands idle between ops for a time per op whatever the op (the backend's
// hand-over): the fit takes the gaps as the stall per op and only the rest of the iteration as a share.
// No-comm predicted with 30 us per op and no share, read as a measurement, gives both back and its iteration
// again; with 10 % more iteration the rest becomes a share; read as a prediction, the gaps are the model's
// own stall and all of it a share.
TEST(CalibrateStallToIteration, AMeasuredTracesGapsAreTheStallPerOp) {
  Profile truth = with_stall(0);
  truth.interference.compute_stall_per_op_us = 30;
  Predicted no_comm = predicted(truth, "no-comm");
  no_comm.trace.source = "measured";
  const CalibrationResult r =
      calibrate_profile(with_stall(0.2), no_comm.trace, 0, parse_calibration_scope("stall"));
  EXPECT_NEAR(r.profile.interference.compute_stall_per_op_us, 30, 1e-6) << r.report;
  EXPECT_NEAR(r.profile.interference.compute_stall_share, 0, 1e-9) << r.report;
  EXPECT_NE(r.report.find("gaps of 30 us per op measured"), std::string::npos) << r.report;
  EXPECT_NEAR(simulate(no_comm.schedule, CostModel(r.profile)).iteration_us, no_comm.iteration_us,
              1e-6 * no_comm.iteration_us);
  no_comm.trace.meta["iteration_time_us"] = 1.1 * no_comm.iteration_us;
  const CalibrationResult longer =
      calibrate_profile(truth, no_comm.trace, 0, parse_calibration_scope("stall"));
  EXPECT_NEAR(longer.profile.interference.compute_stall_per_op_us, 30, 1e-6) << longer.report;
  EXPECT_GT(longer.profile.interference.compute_stall_share, 0) << longer.report;
  EXPECT_NEAR(simulate(no_comm.schedule, CostModel(longer.profile)).iteration_us, 1.1 * no_comm.iteration_us,
              1e-6 * no_comm.iteration_us);
  no_comm.trace.source = "predicted";
  const CalibrationResult own = calibrate_profile(truth, no_comm.trace, 0, parse_calibration_scope("stall"));
  EXPECT_EQ(own.profile.interference.compute_stall_per_op_us, 0) << own.report;
  EXPECT_NE(own.report.find("no gap measured"), std::string::npos) << own.report;
}

TEST(CalibrateStallToIteration, RefusesWhatItCannotFit) {
  expect_refused(with_stall(0), predicted(with_stall(0.1), "megatron-sync").trace, "stall",
                 "without collectives");
  TraceFile no_time = predicted(with_stall(0.1), "no-comm").trace;
  no_time.meta.erase("iteration_time_us");
  expect_refused(with_stall(0), no_time, "stall", "--fit stall needs the trace's iteration time");
  const Profile gpu = load_profile(resolve_profile_path("dgx-h100"));
  expect_refused(gpu, predicted(with_stall(0.1), "no-comm").trace, "stall", "gpu section");
  EXPECT_FALSE(parse_calibration_scope("all").stall);
  EXPECT_TRUE(parse_calibration_scope("gemm,stall").stall);
}

// megatron-sync predicted with its compute 6 % slower than no-comm's same ops gives the slowdown back from a
// profile without one and from one with another, and its iteration again; no-comm's trace, which has no
// collective to tell it by, is refused, as is a gpu profile.
TEST(CalibrateCommCompute, RecoversTheComputesSlowdownInACommunicatingIteration) {
  Profile truth = with_stall(0.1);
  truth.interference.compute_slowdown_with_comm = 0.06;
  const Predicted sync = predicted(truth, "megatron-sync");
  for (double start : {0.0, 0.3}) {
    Profile base = with_stall(0.1);
    base.interference.compute_slowdown_with_comm = start;
    const CalibrationResult r =
        calibrate_profile(base, sync.trace, 0, parse_calibration_scope("comm_compute"));
    EXPECT_NEAR(r.profile.interference.compute_slowdown_with_comm, 0.06, 1e-6) << start;
    EXPECT_NE(r.report.find("compute slowdown in a communicating iteration"), std::string::npos) << r.report;
    EXPECT_NEAR(simulate(sync.schedule, CostModel(r.profile)).iteration_us, sync.iteration_us,
                1e-6 * sync.iteration_us);
  }
  expect_refused(with_stall(0.1), predicted(truth, "no-comm").trace, "comm_compute",
                 "needs a trace with collectives");
  expect_refused(load_profile(resolve_profile_path("dgx-h100")), sync.trace, "comm_compute", "gpu section");
  EXPECT_FALSE(parse_calibration_scope("all").comm_compute);
}

}  // namespace
}  // namespace domino::prof
