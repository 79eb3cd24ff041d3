// calibrate_iterations_test.cpp: calibration on every timed iteration of a trace (domino.iteration_spans,
// domino-exec --trace-iterations): the collectives' delay beside compute pooled over the iterations, on
// hand-built schedules (the start waits' pooling: comm_start_test.cpp).
#include <gtest/gtest.h>

#include "sim/engine/simulator.hpp"
#include "sim/fit/calibrate.hpp"
#include "sim/trace/timeline.hpp"
#include "tests/sim/toy_schedule.hpp"

namespace domino {
namespace {

using Toy = test::ToySchedule;

Profile delay_profile(double delay) {
  Profile p = test::unit_bytes_profile();
  p.interference = {0, 0, delay};
  return p;
}

// `t` simulated with `truth`, labelled as a measurement.
Timeline measured_run(const Toy& t, const Profile& truth) {
  Timeline measured = simulate(t.s, CostModel(truth)).timeline;
  measured.source = "measured";
  return measured;
}

prof::CalibrationResult fit_delay(const Toy& t, const Timeline& measured) {
  const TraceFile trace = read_trace_string(trace_json(t.s, measured).dump(), "made.json");
  return prof::calibrate_profile(delay_profile(0), trace, 2, prof::parse_calibration_scope("comm_delay"));
}

// Per stretch a collective beside a long compute op (mostly beside it). The iteration the events show lost no
// delay, the iterations beside it 600 and 1000 us per collective: pooled, each collective's mean over them is
// 800 us, the delay fitted; from the shown iteration alone, none.
TEST(CalibrateIterations, TheDelayBesideComputeIsEachCollectivesMeanOverTheIterations) {
  Toy t;
  for (int i = 0; i < 6; ++i) {
    const int32_t opener = t.compute(100);
    t.comm(300, {opener});
    t.compute(4000);
  }
  Timeline shown = measured_run(t, delay_profile(0));
  shown.iteration_spans = {measured_run(t, delay_profile(600)).spans,
                           measured_run(t, delay_profile(1000)).spans};
  const prof::CalibrationResult pooled = fit_delay(t, shown);
  EXPECT_NEAR(pooled.profile.interference.comm_delay_during_compute_us, 800, 1e-6);
  EXPECT_NE(pooled.report.find("6 collectives, 12 runs over 2 iterations"), std::string::npos)
      << pooled.report;
  shown.iteration_spans.clear();
  EXPECT_EQ(fit_delay(t, shown).profile.interference.comm_delay_during_compute_us, 0);
}

}  // namespace
}  // namespace domino
