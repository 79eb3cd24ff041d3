// collective_split_test.cpp: a measured collective split into its transfer (from the last rank's arrival)
// and its arrival wait, on hand-made two-rank traces whose figures are worked out in the comments, and
// domino-compare scoring each against the prediction's (args.arrival_wait_us).
#include "sim/compare/collective_split.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "sim/base/error.hpp"
#include "sim/compare/compare.hpp"
#include "sim/compare/report_html.hpp"
#include "tests/compare/trace_builders.hpp"

namespace domino {
namespace {

using test::span;
using test::trace;

TraceEvent with_op(TraceEvent e, int op) {
  e.args["op"] = op;
  return e;
}

// Two ranks: a GEMM (op 0) then an AllReduce (op 1). The events show the third iteration; iteration_spans
// hold three:
//   1: rank 0 arrives at 100, rank 1 at 300, both end at 400: transfer 100, wait 300 - 200 = 100
//   2: rank 0 at 200, rank 1 at 100, both end at 350:        transfer 150, wait 200 - 150 = 50
//   3: both at 100, end at 220:                               transfer 120, wait 0
// Transfer: the median of 100, 150, 120 = 120 (p10 104, p90 144); wait: the mean, 50.
TraceFile measured_two_ranks(const std::string& clocks = "shared") {
  std::vector<TraceEvent> events = {with_op(span("g", "gemm", 0, 0, 0, 100), 0),
                                    with_op(span("g", "gemm", 1, 0, 0, 100), 0),
                                    with_op(span("ar", "allreduce", 0, 1, 100, 120), 1),
                                    with_op(span("ar", "allreduce", 1, 1, 100, 120), 1)};
  const nlohmann::json spans = {
      {{0, 0, 0, 100}, {1, 0, 0, 300}, {0, 1, 100, 400}, {1, 1, 300, 400}},
      {{0, 0, 0, 200}, {1, 0, 0, 100}, {0, 1, 200, 350}, {1, 1, 100, 350}},
      {{0, 0, 0, 100}, {1, 0, 0, 100}, {0, 1, 100, 220}, {1, 1, 100, 220}},
  };
  return trace("m.json", events,
               {{"source", "measured"}, {"rank_clocks", clocks}, {"iteration_spans", spans}});
}

// Rank 0 only: the GEMM, and the AllReduce's span of 300 us of which `wait` (when >= 0) is the arrival wait.
TraceFile predicted(double wait) {
  TraceEvent ar = span("ar", "allreduce", 0, 1, 100, 300);
  if (wait >= 0) ar.arrival_wait_us = wait;
  return trace("p.json", {span("g", "gemm", 0, 0, 0, 100), ar}, {{"source", "predicted"}});
}

const OpComparison& op_named(const Comparison& c, const std::string& id) {
  const auto it =
      std::find_if(c.ops.begin(), c.ops.end(), [&](const OpComparison& op) { return op.id == id; });
  if (it == c.ops.end()) throw std::runtime_error("no op " + id);
  return *it;
}

const KindError* kind_row(const Comparison& c, const std::string& kind) {
  for (const KindError& k : c.by_kind)
    if (k.kind == kind) return &k;
  return nullptr;
}

TEST(CollectiveSplit, TheTransferRunsFromTheLastArrivalAndTheWaitIsTheLastAfterTheMedian) {
  const auto splits = measured_collective_splits(measured_two_ranks(), {0, 1}, false);
  ASSERT_EQ(splits.size(), 1u);  // the GEMM is no collective
  const MeasuredCollectiveSplit& ar = splits.at("ar");
  EXPECT_EQ(ar.iterations, 3);
  EXPECT_DOUBLE_EQ(ar.transfer_us, 120);
  EXPECT_DOUBLE_EQ(ar.transfer_p10_us, 104);
  EXPECT_DOUBLE_EQ(ar.transfer_p90_us, 144);
  EXPECT_DOUBLE_EQ(ar.wait_us, 50);
  // The trace's one iteration (the third): both arrived together.
  const MeasuredCollectiveSplit one = measured_collective_splits(measured_two_ranks(), {0, 1}, true).at("ar");
  EXPECT_EQ(one.iterations, 1);
  EXPECT_DOUBLE_EQ(one.transfer_us, 120);
  EXPECT_DOUBLE_EQ(one.wait_us, 0);
}

TEST(CollectiveSplit, NoSplitWithOneRankOrRanksOnClocksOfTheirOwn) {
  EXPECT_TRUE(measured_collective_splits(measured_two_ranks(), {0}, false).empty());
  EXPECT_TRUE(measured_collective_splits(measured_two_ranks("per-rank"), {0, 1}, false).empty());
}

TEST(CollectiveSplit, CompareScoresTheTransferAndTheWaitApart) {
  // Predicted: 300 us of which 100 the wait, so a transfer of 200; measured transfer 120, wait 50.
  const Comparison c = compare_traces(predicted(100), measured_two_ranks());
  const OpComparison& ar = op_named(c, "ar");
  EXPECT_DOUBLE_EQ(ar.predicted_us, 200);
  EXPECT_DOUBLE_EQ(ar.measured_us, 120);
  EXPECT_DOUBLE_EQ(ar.error_pct, 40);  // |120 - 200| / 200
  EXPECT_DOUBLE_EQ(ar.predicted_wait_us, 100);
  EXPECT_DOUBLE_EQ(ar.measured_wait_us, 50);
  EXPECT_DOUBLE_EQ(ar.wait_delta_us(), -50);
  EXPECT_DOUBLE_EQ(ar.measured_p10_us, 104);
  const KindError* wait = kind_row(c, kArrivalWaitKind);
  ASSERT_NE(wait, nullptr);
  EXPECT_EQ(wait->count, 1);
  EXPECT_DOUBLE_EQ(wait->median_pct, 50);  // |50 - 100| / 100
  ASSERT_NE(kind_row(c, "allreduce"), nullptr);
  EXPECT_DOUBLE_EQ(kind_row(c, "allreduce")->median_pct, 40);
  EXPECT_NE(c.measured_durations.find("arrival wait"), std::string::npos);
  // The GEMM is judged as before.
  EXPECT_DOUBLE_EQ(op_named(c, "g").measured_us, 100);
  EXPECT_EQ(op_named(c, "g").predicted_wait_us, -1);
  // The report shows the wait beside the transfer, and the row.
  const std::string html = render_html_report(predicted(100), measured_two_ranks(), c);
  EXPECT_NE(html.find("<td>200.00</td><td>120.00</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>100 / 50</td>"), std::string::npos);
  EXPECT_NE(html.find(kArrivalWaitKind), std::string::npos);
}

TEST(CollectiveSplit, ACollectivePredictedAlignedIsSplitButItsWaitNotScored) {
  // Charged no wait: the whole span is the transfer (300 against 120); a measured wait has nothing to be
  // judged against.
  const Comparison c = compare_traces(predicted(0), measured_two_ranks());
  EXPECT_DOUBLE_EQ(op_named(c, "ar").predicted_us, 300);
  EXPECT_DOUBLE_EQ(op_named(c, "ar").measured_us, 120);
  EXPECT_EQ(kind_row(c, kArrivalWaitKind), nullptr);
}

TEST(CollectiveSplit, APredictionWithoutItsWaitsIsJudgedOnTheWholeSpan) {
  // A predicted trace written before the waits were recorded, or one rank compared: the collective's span
  // against the measured median over the ranks of its duration in the trace's iteration (120).
  for (const Comparison& c :
       {compare_traces(predicted(-1), measured_two_ranks()),
        compare_traces(predicted(100), measured_two_ranks(), CompareOptions{0, false})}) {
    const OpComparison& ar = op_named(c, "ar");
    EXPECT_EQ(ar.predicted_wait_us, -1);
    EXPECT_DOUBLE_EQ(ar.predicted_us, 300);
    EXPECT_DOUBLE_EQ(ar.measured_us, 120);
    EXPECT_EQ(kind_row(c, kArrivalWaitKind), nullptr);
  }
}

TraceEvent in_phase(TraceEvent e, const std::string& phase) {
  e.args["phase"] = phase;
  return e;
}

TEST(CollectiveSplit, TheWaitsAreAveragedPerPhase) {
  // The AllReduce above in the backward pass (measured wait 50, predicted 100) and a forward one (op 2) that
  // the ranks reach together in every iteration (measured wait 0) and the prediction charged 40.
  TraceFile measured = measured_two_ranks();
  for (TraceEvent& e : measured.events)
    if (e.id == "ar") e = in_phase(e, "bwd");
  for (int rank : {0, 1})
    measured.events.push_back(in_phase(with_op(span("far", "allreduce", rank, 1, 500, 50), 2), "fwd"));
  for (nlohmann::json& iteration : measured.meta["iteration_spans"])
    for (int rank : {0, 1}) iteration.push_back({rank, 2, 500, 550});
  TraceFile pred = predicted(100);
  pred.events.back() = in_phase(pred.events.back(), "bwd");
  TraceEvent far = in_phase(span("far", "allreduce", 0, 1, 500, 90), "fwd");
  far.arrival_wait_us = 40;
  pred.events.push_back(far);

  const Comparison c = compare_traces(pred, measured);
  ASSERT_EQ(c.waits_by_phase.size(), 2u);
  EXPECT_EQ(c.waits_by_phase[0].phase, "bwd");
  EXPECT_EQ(c.waits_by_phase[0].count, 1);
  EXPECT_DOUBLE_EQ(c.waits_by_phase[0].predicted_mean_us, 100);
  EXPECT_DOUBLE_EQ(c.waits_by_phase[0].measured_mean_us, 50);
  EXPECT_EQ(c.waits_by_phase[1].phase, "fwd");
  EXPECT_DOUBLE_EQ(c.waits_by_phase[1].predicted_mean_us, 40);
  EXPECT_DOUBLE_EQ(c.waits_by_phase[1].measured_mean_us, 0);
  const nlohmann::json j = comparison_json(c);
  EXPECT_DOUBLE_EQ(j["arrival_wait_by_phase"]["bwd"]["measured_mean_us"].get<double>(), 50);
  EXPECT_EQ(j["arrival_wait_by_phase"]["fwd"]["count"].get<int>(), 1);
  EXPECT_NE(comparison_table(c).find("bwd 100 / 50 (1); fwd 40 / 0 (1)"), std::string::npos)
      << comparison_table(c);
  // Nothing split (one rank compared): no phase figures.
  EXPECT_TRUE(compare_traces(pred, measured, CompareOptions{0, false}).waits_by_phase.empty());
}

TEST(CollectiveSplit, TheTraceReaderChecksTheRecordedWait) {
  const auto read_with = [](const nlohmann::json& wait) {
    const nlohmann::json doc = {{"traceEvents",
                                 {{{"name", "ar"},
                                   {"cat", "allreduce"},
                                   {"ph", "X"},
                                   {"ts", 0},
                                   {"dur", 300},
                                   {"pid", 0},
                                   {"tid", 1},
                                   {"args", {{"arrival_wait_us", wait}}}}}}};
    return read_trace_string(doc.dump(), "w.json");
  };
  EXPECT_DOUBLE_EQ(read_with(100).events.at(0).arrival_wait_us, 100);
  for (const nlohmann::json& bad : {nlohmann::json(-1), nlohmann::json("x"), nlohmann::json(301)}) {
    try {
      read_with(bad);
      ADD_FAILURE() << "accepted arrival_wait_us " << bad.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("arrival_wait_us"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace domino
