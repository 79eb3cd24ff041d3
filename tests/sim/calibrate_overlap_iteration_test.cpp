// calibrate_overlap_iteration_test.cpp: --fit interference_iteration. The compute's slowdown beside
// collectives is found again from the iteration time it gave an overlapped plan, the range's ends are
// reported, and the schedule is rebuilt from a trace's header only when it is the one the trace ran.
#include <gtest/gtest.h>

#include <filesystem>

#include "sim/base/error.hpp"
#include "sim/engine/simulator.hpp"
#include "sim/fit/calibrate.hpp"
#include "sim/fit/calibrate_terms.hpp"
#include "tests/sim/calibration_profile.hpp"

namespace domino::prof {
namespace {

// cpu-gpt, TP 2, batch slices of two: half the batch's AllReduces run beside the other half's compute.
Schedule overlapped_schedule() {
  const ModelSpec model = default_model();
  return build_schedule(model, make_strategy_plan("slices:2x1:batch", model));
}

Profile with_slowdowns(double compute, double comm) {
  Profile p = test::calibration_profile("slowed");
  p.interference.compute_slowdown_during_comm = compute;
  p.interference.comm_slowdown_during_compute = comm;
  return p;
}

double iteration_us(const Schedule& s, const Profile& p) { return simulate(s, CostModel(p)).iteration_us; }

TEST(CalibrateOverlapIteration, FindsTheComputeSlowdownThatGaveTheIteration) {
  const Schedule s = overlapped_schedule();
  const double measured = iteration_us(s, with_slowdowns(1.3, 0.4));
  ASSERT_GT(measured,
            iteration_us(s, with_slowdowns(0.1, 0.4)) * 1.01);  // the slowdown shows in the iteration
  Profile p = with_slowdowns(0.1, 0.4);
  std::string report;
  calibration::fit_compute_slowdown_to_iteration(s, measured, p, report);
  EXPECT_NEAR(p.interference.compute_slowdown_during_comm, 1.3, 0.02);
  EXPECT_NEAR(iteration_us(s, p), measured, 1e-6 * measured);
  EXPECT_DOUBLE_EQ(p.interference.comm_slowdown_during_compute, 0.4);  // the collectives' own is kept
  EXPECT_NE(report.find("0.1 -> 1.3"), std::string::npos) << report;
}

TEST(CalibrateOverlapIteration, ARunFasterThanAnySlowdownKeepsNoneAndOneSlowerTakesTheRangesEnd) {
  const Schedule s = overlapped_schedule();
  const double unslowed = iteration_us(s, with_slowdowns(0, 0.4));
  Profile fast = with_slowdowns(0.5, 0.4), slow = fast;
  std::string report_fast, report_slow;
  calibration::fit_compute_slowdown_to_iteration(s, 0.9 * unslowed, fast, report_fast);
  EXPECT_EQ(fast.interference.compute_slowdown_during_comm, 0);
  EXPECT_NE(report_fast.find("no longer than predicted without any slowdown"), std::string::npos)
      << report_fast;
  calibration::fit_compute_slowdown_to_iteration(s, 10 * unslowed, slow, report_slow);
  EXPECT_EQ(slow.interference.compute_slowdown_during_comm, 9);
  EXPECT_NE(report_slow.find("the end of the range"), std::string::npos) << report_slow;
}

// Through calibrate_profile: the schedule comes from the trace's own header (model, strategy, TP, shape).
TEST(CalibrateOverlapIteration, CalibrationRebuildsTheScheduleFromTheTrace) {
  const Schedule s = overlapped_schedule();
  const SimResult truth = simulate(s, CostModel(with_slowdowns(2.0, 0.4)));
  const std::string path =
      (std::filesystem::temp_directory_path() / "domino_overlap_iteration.json").string();
  write_trace(path, s, truth.timeline);
  const TraceFile trace = read_trace(path);
  std::filesystem::remove(path);
  CalibrationScope scope = parse_calibration_scope("interference_iteration");
  EXPECT_FALSE(scope.gemm || scope.comm_delay || scope.sync);
  const CalibrationResult r = calibrate_profile(with_slowdowns(0.2, 0.4), trace, 0, scope);
  EXPECT_NEAR(r.profile.interference.compute_slowdown_during_comm, 2.0, 0.03);
  EXPECT_NE(r.report.find("compute slowdown beside collectives from the iteration time"), std::string::npos);
}

TEST(CalibrateOverlapIteration, TheScheduleIsRebuiltOnlyWhenItIsTheOneTheTraceRan) {
  const Schedule s = overlapped_schedule();
  TraceFile trace;
  trace.path = "run.trace.json";
  trace.meta = {{"model", "cpu-gpt"},
                {"strategy", "slices:2x1:batch"},
                {"tp", 2},
                {"schedule_fingerprint", schedule_fingerprint(s)}};
  const Schedule rebuilt = calibration::schedule_of_trace(trace);
  EXPECT_EQ(schedule_fingerprint(rebuilt), schedule_fingerprint(s));
  EXPECT_EQ(rebuilt.ops.size(), s.ops.size());

  const auto fails_with = [](const TraceFile& t, const std::string& words) {
    try {
      calibration::schedule_of_trace(t);
      ADD_FAILURE() << "no error; expected one saying " << words;
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2);
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  TraceFile other = trace;
  other.meta["micro_batch"] = 2;  // another shape than the run's: its ops differ
  fails_with(other, "is not the one the trace ran");
  TraceFile unnamed = trace;
  unnamed.meta.erase("strategy");
  fails_with(unnamed, "needs the trace's named strategy");
  TraceFile custom = trace;
  custom.meta["strategy"] = "my-plan";
  fails_with(custom, "rebuilds the run's schedule from its model 'cpu-gpt' and strategy 'my-plan'");
  // The optimizer the header names: SGD's schedule is rebuilt as SGD's (its fingerprint, not Adam's), and a
  // name domino-exec does not run is refused.
  BuildOptions sgd;
  sgd.optimizer = OptimizerKind::SgdMomentum;
  const Schedule with_sgd =
      build_schedule(default_model(), make_strategy_plan("slices:2x1:batch", default_model()), sgd);
  ASSERT_NE(schedule_fingerprint(with_sgd), schedule_fingerprint(s));
  TraceFile sgd_run = trace;
  sgd_run.meta["optimizer"] = to_string(OptimizerKind::SgdMomentum);
  sgd_run.meta["schedule_fingerprint"] = schedule_fingerprint(with_sgd);
  EXPECT_EQ(schedule_fingerprint(calibration::schedule_of_trace(sgd_run)), schedule_fingerprint(with_sgd));
  TraceFile lion = trace;
  lion.meta["optimizer"] = "lion";
  fails_with(lion, "domino.optimizer 'lion'");
  EXPECT_EQ(optimizer_kind_named("adam"), OptimizerKind::Adam);
  EXPECT_EQ(optimizer_kind_named("sgd"), OptimizerKind::SgdMomentum);
}

// megatron-sync runs no collective beside compute: no slowdown changes its iteration, so none is fitted.
TEST(CalibrateOverlapIteration, ARunWithoutOverlapIsRefused) {
  const ModelSpec model = default_model();
  const Schedule sync = build_schedule(model, make_strategy_plan("megatron-sync", model));
  Profile p = with_slowdowns(0.5, 0.4);
  std::string report;
  try {
    calibration::fit_compute_slowdown_to_iteration(sync, 2 * iteration_us(sync, p), p, report);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find("needs an overlapped plan's trace"), std::string::npos) << e.what();
  }
  EXPECT_EQ(p.interference.compute_slowdown_during_comm, 0.5);
}

TEST(CalibrateOverlapIteration, AGpuProfileHasNoFlatSlowdownToFit) {
  Profile gpu = with_slowdowns(0, 0);
  gpu.gpu = GpuProfile{};
  std::string report;
  EXPECT_THROW(calibration::fit_compute_slowdown_to_iteration(overlapped_schedule(), 1e5, gpu, report),
               Error);
}

}  // namespace
}  // namespace domino::prof
