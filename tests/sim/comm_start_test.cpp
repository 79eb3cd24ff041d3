// comm_start_test.cpp: a CPU collective's start beside compute (InterferenceProfile::comm_start_wait and
// comm_resume_wait_us) on hand-built schedules worked out on paper, and its calibration
// (--fit comm_start) recovering the waits from a trace made with them, pooled over every iteration a trace
// carries, as the delay beside compute (--fit comm_delay) is.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/base/error.hpp"
#include "sim/engine/simulator.hpp"
#include "sim/fit/calibrate.hpp"
#include "sim/trace/timeline.hpp"
#include "tests/sim/toy_schedule.hpp"

namespace domino {
namespace {

using Toy = test::ToySchedule;

Profile waiting_profile(double wait, double decay = 0, double resume = 0) {
  Profile p = test::unit_bytes_profile();
  p.interference = {0, 0};
  p.interference.comm_start_wait_us = wait;
  p.interference.comm_start_wait_decay_us = decay;
  p.interference.comm_resume_wait_us = resume;
  return p;
}

double start_of(const SimResult& r, int32_t op) {
  for (const OpSpan& s : r.timeline.spans)
    if (s.op == op) return s.start_us;
  ADD_FAILURE() << "no span for op " << op;
  return -1;
}

TEST(CommStart, ACollectiveDueWhileComputeRunsWaitsForTheCoreOrTheComputesIdle) {
  const CostModel cm(waiting_profile(30));
  {
    Toy t;  // b holds the core from 10 to 110: the wait ends first
    const int32_t a = t.compute(10);
    t.compute(100);
    const int32_t ar = t.comm(20, {a});
    const SimResult r = simulate(t.s, cm);
    EXPECT_DOUBLE_EQ(start_of(r, ar), 40);
    EXPECT_DOUBLE_EQ(r.iteration_us, 110);
  }
  {
    Toy t;  // the compute stream waits for it: the core is free at once
    const int32_t a = t.compute(10);
    const int32_t ar = t.comm(20, {a});
    t.compute(5, {ar});
    EXPECT_DOUBLE_EQ(start_of(simulate(t.s, cm), ar), 10);
  }
  {
    Toy t;  // b ends at 25 and the stream then waits for the collective: it starts at 25, before the wait
            // ends
    const int32_t a = t.compute(10);
    t.compute(15);
    const int32_t ar = t.comm(20, {a});
    t.compute(5, {ar});
    EXPECT_DOUBLE_EQ(start_of(simulate(t.s, cm), ar), 25);
  }
  {
    Toy t;  // an op boundary with the next op ready is no idle moment: the wait runs out first
    const int32_t a = t.compute(10);
    t.compute(15);
    t.compute(100);
    const int32_t ar = t.comm(20, {a});
    EXPECT_DOUBLE_EQ(start_of(simulate(t.s, cm), ar), 40);
  }
  {
    Toy t;  // no wait in the profile: the collective starts when due
    const int32_t a = t.compute(10);
    t.compute(100);
    const int32_t ar = t.comm(20, {a});
    EXPECT_DOUBLE_EQ(start_of(simulate(t.s, CostModel(waiting_profile(0))), ar), 10);
  }
}

TEST(CommStart, TheWaitShrinksWithTheThreadsSleep) {
  Toy t;
  const int32_t a = t.compute(10);
  const int32_t ar0 = t.comm(10, {a});  // its thread never ran: slept without end, no wait
  const int32_t b = t.compute(40);      // 10 .. 50
  t.compute(100);
  const int32_t ar1 = t.comm(10, {b});  // due at 50, its thread asleep since 20
  const SimResult r = simulate(t.s, CostModel(waiting_profile(30, 10)));
  EXPECT_DOUBLE_EQ(start_of(r, ar0), 10);
  EXPECT_NEAR(start_of(r, ar1), 50 + 30 * std::exp(-30.0 / 10), 1e-9);
}

TEST(CommStart, ACollectiveDueAsTheOneBeforeWakesTheComputeWaitsForTheResume) {
  const CostModel cm(waiting_profile(0, 0, 7));
  {
    Toy t;  // ar0's end at 30 wakes the compute stream (idle since 10), which takes the core
    const int32_t a = t.compute(10);
    const int32_t ar0 = t.comm(20, {a});
    t.compute(50, {ar0});
    const int32_t ar1 = t.comm(10, {a});
    EXPECT_DOUBLE_EQ(start_of(simulate(t.s, cm), ar1), 37);
  }
  {
    Toy t;  // the compute stream ran through ar0's end: its thread, awake, goes on at once
    const int32_t a = t.compute(10);
    t.comm(20, {a});
    t.compute(50);
    const int32_t ar1 = t.comm(10, {a});
    EXPECT_DOUBLE_EQ(start_of(simulate(t.s, cm), ar1), 30);
  }
}

// `t` simulated with `truth`, labelled as a measurement.
Timeline measured_run(const Toy& t, const Profile& truth) {
  Timeline measured = simulate(t.s, CostModel(truth)).timeline;
  measured.source = "measured";
  return measured;
}

// `start` calibrated on the trace of `t` as `measured` ran it, the terms `scope` names.
prof::CalibrationResult calibrated(const Toy& t, const Timeline& measured, const Profile& start, const char* scope) {
  const TraceFile trace = read_trace_string(trace_json(t.s, measured).dump(), "made.json");
  return prof::calibrate_profile(start, trace, 2, prof::parse_calibration_scope(scope));
}

// The start waits fitted, from nothing, on the trace of `t` as `measured` ran it.
prof::CalibrationResult fit_comm_start(const Toy& t, const Timeline& measured) {
  return calibrated(t, measured, waiting_profile(0), "comm_start");
}

// A trace simulated with known waits carries what calibration needs (spans and deps): the fit finds them
// back. Per stretch: a collective due while a long compute op holds the core (its thread asleep 0.5-8 ms, so
// that the decay is told from the wait), then one the compute stream waits for, and behind it one whose turn
// comes as that one's end wakes the compute stream.
TEST(CommStart, CalibrationRecoversTheWaitsFromATraceMadeWithThem) {
  const double decay = 250 * std::pow(1.2, 16);  // on the fit's grid
  const Profile truth = waiting_profile(2000, decay, 800);
  Toy t;
  for (int i = 0; i < 12; ++i) {
    const int32_t opener = t.compute(100);
    t.comm(300, {opener});  // waits while the next op holds the core
    t.compute(3000);
    const int32_t y = t.compute(50);
    const int32_t awaited = t.comm(300, {y});  // the compute stream waits for it: starts at once
    t.comm(300, {y});                          // due behind it: waits for the woken compute
    t.compute(1500 + 1500 * (i % 6), {awaited});
  }
  const Timeline measured = measured_run(t, truth);
  const prof::CalibrationResult fit = fit_comm_start(t, measured);
  const InterferenceProfile& i = fit.profile.interference;
  EXPECT_NEAR(i.comm_start_wait_us, 2000, 10);
  EXPECT_NEAR(i.comm_start_wait_decay_us, decay, 1e-6 * decay);
  EXPECT_NEAR(i.comm_resume_wait_us, 800, 10);
  // A trace without deps (written before traces carried them) fits nothing and says so.
  nlohmann::json without = trace_json(t.s, measured);
  for (auto& e : without["traceEvents"])
    if (e.contains("args")) e["args"].erase("deps");
  const prof::CalibrationResult none =
      prof::calibrate_profile(waiting_profile(0), read_trace_string(without.dump(), "old.json"), 2,
                              prof::parse_calibration_scope("comm_start"));
  EXPECT_EQ(none.profile.interference.comm_start_wait_us, 0);
  EXPECT_NE(none.profile.notes.find("comm start wait: not fitted"), std::string::npos) << none.profile.notes;
}

// A few collectives due while compute runs fit no decay: the wait alone (two parameters on so few samples
// that all slept long had fitted any wait at no sleep), and the report says why.
TEST(CommStart, AFewCollectivesFitTheWaitWithoutADecay) {
  const Profile truth = waiting_profile(2000, 250 * std::pow(1.2, 16), 800);
  Toy t;
  for (int i = 0; i < 6; ++i) {
    const int32_t opener = t.compute(100);
    t.comm(300, {opener});
    t.compute(3000 + 1000 * i);
  }
  const Timeline measured = measured_run(t, truth);
  const prof::CalibrationResult fit = fit_comm_start(t, measured);
  EXPECT_EQ(fit.profile.interference.comm_start_wait_decay_us, 0);
  EXPECT_GT(fit.profile.interference.comm_start_wait_us, 0);
  EXPECT_NE(fit.report.find("(no decay: "), std::string::npos) << fit.report;
}

// A trace with every iteration's spans (domino-exec --trace-iterations) is fitted on all of them: here the
// iteration shown ran without waits and three others with them; pooled, the six collectives of an iteration
// become eighteen, enough for the decay. Spans the trace's events cannot place are refused.
TEST(CommStart, CalibrationPoolsEveryIterationsSpans) {
  const double decay = 250 * std::pow(1.2, 16);
  const Profile truth = waiting_profile(2000, decay);
  Toy t;
  for (int i = 0; i < 6; ++i) {
    const int32_t opener = t.compute(100);
    t.comm(300, {opener});
    t.compute(3000 + 1000 * i);
  }
  Timeline shown = measured_run(t, waiting_profile(0));
  const Timeline waited = measured_run(t, truth);
  shown.iteration_spans.assign(3, waited.spans);
  nlohmann::json pooled = trace_json(t.s, shown);
  const prof::CalibrationResult fit = fit_comm_start(t, shown);
  EXPECT_NEAR(fit.profile.interference.comm_start_wait_us, 2000, 10);
  EXPECT_NEAR(fit.profile.interference.comm_start_wait_decay_us, decay, 1e-6 * decay);
  EXPECT_NE(fit.report.find("3 iterations of the trace pooled"), std::string::npos) << fit.report;
  shown.iteration_spans.clear();
  EXPECT_EQ(fit_comm_start(t, shown).profile.interference.comm_start_wait_us, 0);

  for (const nlohmann::json& bad :
       {nlohmann::json::array({nlohmann::json::array({0, 99999, 1.0, 2.0})}),
        nlohmann::json::array({nlohmann::json::array({0, 1, 5.0, 2.0})}), nlohmann::json("spans")}) {
    pooled["domino"]["iteration_spans"] = bad.is_array() ? nlohmann::json::array({bad}) : bad;
    try {
      prof::calibrate_profile(waiting_profile(0), read_trace_string(pooled.dump(), "bad.json"), 2,
                              prof::parse_calibration_scope("comm_start"));
      ADD_FAILURE() << "accepted iteration_spans " << bad.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("bad.json: domino.iteration_spans"), std::string::npos)
          << e.what();
    }
  }
}

// The delay beside compute is pooled the same way: per stretch a collective beside a long compute op (mostly
// beside it). The iteration the events show lost no delay, the iterations beside it 600 and 1000 us per
// collective: pooled, each collective's mean over them is 800 us, the delay fitted; from the shown iteration
// alone, none.
TEST(CommStart, TheDelayBesideComputeIsEachCollectivesMeanOverTheIterations) {
  const auto delay_profile = [](double delay) {
    Profile p = test::unit_bytes_profile();
    p.interference = {0, 0, delay};
    return p;
  };
  Toy t;
  for (int i = 0; i < 6; ++i) {
    const int32_t opener = t.compute(100);
    t.comm(300, {opener});
    t.compute(4000);
  }
  Timeline shown = measured_run(t, delay_profile(0));
  shown.iteration_spans = {measured_run(t, delay_profile(600)).spans, measured_run(t, delay_profile(1000)).spans};
  const prof::CalibrationResult pooled = calibrated(t, shown, delay_profile(0), "comm_delay");
  EXPECT_NEAR(pooled.profile.interference.comm_delay_during_compute_us, 800, 1e-6);
  EXPECT_NE(pooled.report.find("6 collectives, 12 runs over 2 iterations"), std::string::npos) << pooled.report;
  shown.iteration_spans.clear();
  EXPECT_EQ(calibrated(t, shown, delay_profile(0), "comm_delay").profile.interference.comm_delay_during_compute_us,
            0);
}

}  // namespace
}  // namespace domino
