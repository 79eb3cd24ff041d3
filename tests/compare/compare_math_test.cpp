// compare_math_test.cpp: the comparison's arithmetic on tiny hand-made traces whose answers are worked
// out in the comments: percentiles, interval unions, inferred critical paths, rank modes, edge cases.
#include <gtest/gtest.h>

#include <algorithm>

#include "sim/compare/compare.hpp"
#include "sim/base/error.hpp"
#include "tests/compare/trace_builders.hpp"

namespace domino {
namespace {

using test::span;
using test::trace;

std::vector<const TraceEvent*> ptrs(const std::vector<TraceEvent>& v) {
  std::vector<const TraceEvent*> out;
  for (const auto& e : v) out.push_back(&e);
  return out;
}

std::vector<std::string> ids(const std::vector<const TraceEvent*>& v) {
  std::vector<std::string> out;
  for (auto* e : v) out.push_back(e->id);
  return out;
}

TEST(Percentile, LinearInterpolation) {
  EXPECT_EQ(percentile({}, 0.5), 0);
  EXPECT_DOUBLE_EQ(percentile({7}, 0.9), 7);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 0.5), 2.5);   // unsorted input
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 0.9), 3.7);   // pos 2.7: 3 + 0.7 * 1
  EXPECT_DOUBLE_EQ(percentile({10, 0, 20}, 0.5), 10);
  EXPECT_DOUBLE_EQ(percentile({10, 0, 20}, 1.0), 20);
  EXPECT_DOUBLE_EQ(percentile({10, 0, 20}, 0.0), 0);
}

TEST(StreamUsage, ExposedIsCommNotCoveredByCompute) {
  // compute [0,10) [20,30); comm [5,25) and [8,12) overlap each other: union [5,25) = 20 us,
  // covered by compute [5,10) + [20,25) = 10 us, so 10 us exposed.
  std::vector<TraceEvent> ev = {span("c1", "gemm", 0, 0, 0, 10), span("c2", "gemm", 0, 0, 20, 10),
                                span("a1", "allreduce", 0, 1, 5, 20), span("a2", "allreduce", 0, 1, 8, 4)};
  StreamUsage u = stream_usage(ptrs(ev));
  EXPECT_DOUBLE_EQ(u.compute_busy_us, 20);
  EXPECT_DOUBLE_EQ(u.comm_busy_us, 20);
  EXPECT_DOUBLE_EQ(u.exposed_comm_us, 10);
  EXPECT_DOUBLE_EQ(u.overlap_fraction(), 0.5);
}

TEST(StreamUsage, NoCommMeansNothingExposed) {
  std::vector<TraceEvent> ev = {span("c1", "gemm", 0, 0, 0, 10)};
  StreamUsage u = stream_usage(ptrs(ev));
  EXPECT_EQ(u.comm_busy_us, 0);
  EXPECT_EQ(u.exposed_comm_us, 0);
  EXPECT_EQ(u.overlap_fraction(), 0);
}

TEST(StreamUsage, FullyHiddenComm) {
  std::vector<TraceEvent> ev = {span("c1", "gemm", 0, 0, 0, 10), span("a1", "allreduce", 0, 1, 2, 5)};
  StreamUsage u = stream_usage(ptrs(ev));
  EXPECT_EQ(u.exposed_comm_us, 0);
  EXPECT_DOUBLE_EQ(u.overlap_fraction(), 1.0);
}

TEST(CriticalPath, FollowsTheLaterFinisher) {
  // a [0,5) -> ar [5,15) on comm; b [5,8) keeps computing; c waits for ar: starts at 15.5 (a measured gap).
  // From c: previous compute op b ended at 8, ar ended at 15 -> ar. From ar: a ended at 5 -> a.
  std::vector<TraceEvent> ev = {span("a", "gemm", 0, 0, 0, 5), span("ar", "allreduce", 0, 1, 5, 10),
                                span("b", "gemm", 0, 0, 5, 3), span("c", "gemm", 0, 0, 15.5, 2)};
  EXPECT_EQ(ids(critical_path(ptrs(ev))), (std::vector<std::string>{"a", "ar", "c"}));
}

TEST(CriticalPath, StaysOnComputeWhenCommIsHidden) {
  // ar [5,7) hides under b [5,12); c starts when b ends.
  std::vector<TraceEvent> ev = {span("a", "gemm", 0, 0, 0, 5), span("ar", "allreduce", 0, 1, 5, 2),
                                span("b", "gemm", 0, 0, 5, 7), span("c", "gemm", 0, 0, 12, 1)};
  EXPECT_EQ(ids(critical_path(ptrs(ev))), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(CriticalPath, EndsOnTheLastOpEvenOnTheCommStream) {
  std::vector<TraceEvent> ev = {span("a", "gemm", 0, 0, 0, 5), span("ar", "allreduce", 0, 1, 5, 10)};
  EXPECT_EQ(ids(critical_path(ptrs(ev))), (std::vector<std::string>{"a", "ar"}));
}

TEST(CriticalPath, ZeroLengthOpsOnBothStreamsDoNotLoop) {
  // Each zero-length op "finished no later than the other started": without care the walk would cycle.
  std::vector<TraceEvent> ev = {span("z1", "copy", 0, 0, 5, 0), span("z2", "allreduce", 0, 1, 5, 0)};
  auto path = ids(critical_path(ptrs(ev)));
  EXPECT_EQ(path, (std::vector<std::string>{"z2", "z1"}));
}

TEST(CriticalPath, ZeroLengthOpAfterItsPredecessorIsTheEnd) {
  std::vector<TraceEvent> ev = {span("a", "gemm", 0, 0, 0, 5), span("z", "copy", 0, 0, 5, 0)};
  EXPECT_EQ(ids(critical_path(ptrs(ev))), (std::vector<std::string>{"a", "z"}));
}

TEST(CriticalPath, RoundingWithinANanosecondStillTouches) {
  std::vector<TraceEvent> ev = {span("a", "gemm", 0, 0, 0, 5.0004), span("ar", "allreduce", 0, 1, 5, 1)};
  EXPECT_EQ(ids(critical_path(ptrs(ev))), (std::vector<std::string>{"a", "ar"}));
}

// Two-rank measurement against a rank-0-only prediction.
struct RankFixture {
  TraceFile predicted = trace("p.json", {span("x", "gemm", 0, 0, 0, 10), span("y", "allreduce", 0, 1, 10, 10)});
  TraceFile measured = trace("m.json", {span("x", "gemm", 0, 0, 0, 12), span("y", "allreduce", 0, 1, 12, 10),
                                        span("x", "gemm", 1, 0, 0, 16), span("y", "allreduce", 1, 1, 16, 12)});
};

TEST(CompareTraces, MedianAcrossRanksByDefault) {
  RankFixture f;
  Comparison c = compare_traces(f.predicted, f.measured);
  ASSERT_EQ(c.ops.size(), 2u);
  EXPECT_DOUBLE_EQ(c.ops[0].measured_us, 14);  // median of 12 and 16
  EXPECT_DOUBLE_EQ(c.ops[0].error_pct, 40);
  EXPECT_DOUBLE_EQ(c.ops[1].measured_us, 11);
  EXPECT_DOUBLE_EQ(c.ops[1].error_pct, 10);
  // No meta: iteration times from the spans; measured ends last on rank 1 at 28.
  EXPECT_EQ(c.predicted.iteration_from, "spans");
  EXPECT_DOUBLE_EQ(c.predicted.iteration_us, 20);
  EXPECT_DOUBLE_EQ(c.measured.iteration_us, 28);
  EXPECT_DOUBLE_EQ(c.iteration_error_pct, 40);
  EXPECT_EQ(c.measured.critical_rank, 1);
  EXPECT_DOUBLE_EQ(c.measured.exposed_comm_us, 11);  // median of 10 and 12
  EXPECT_NE(c.mode.find("median"), std::string::npos);
}

TEST(CompareTraces, OneRank) {
  RankFixture f;
  Comparison c = compare_traces(f.predicted, f.measured, CompareOptions{1});
  EXPECT_DOUBLE_EQ(c.ops[0].measured_us, 16);
  EXPECT_DOUBLE_EQ(c.ops[0].predicted_us, 10);  // predicted rank 0 stands for rank 1
  EXPECT_DOUBLE_EQ(c.measured.exposed_comm_us, 12);
  EXPECT_NE(c.mode.find("stands for every rank"), std::string::npos);
}

TEST(CompareTraces, MissingRankIsBadInputNamingTheTrace) {
  RankFixture f;
  try {
    compare_traces(f.predicted, f.measured, CompareOptions{3});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find("m.json: no rank 3 in this trace (ranks: 0, 1)"), std::string::npos) << e.what();
  }
}

TEST(CompareTraces, MetaIterationTimeWins) {
  RankFixture f;
  f.predicted.meta["iteration_time_us"] = 25.0;
  f.measured.meta["iteration_time_us"] = 30.0;
  Comparison c = compare_traces(f.predicted, f.measured);
  EXPECT_EQ(c.measured.iteration_from, "meta");
  EXPECT_DOUBLE_EQ(c.iteration_error_pct, 20);
}

TEST(CompareTraces, ZeroPredictedDurationIsNotScored) {
  TraceFile p = trace("p.json", {span("x", "gemm", 0, 0, 0, 10), span("z", "copy", 0, 0, 10, 0)});
  TraceFile m = trace("m.json", {span("x", "gemm", 0, 0, 0, 11), span("z", "copy", 0, 0, 11, 2)});
  Comparison c = compare_traces(p, m);
  EXPECT_EQ(c.scored_ops, 1);
  EXPECT_DOUBLE_EQ(c.op_error_median_pct, 10);
  EXPECT_LT(c.ops[1].error_pct, 0);
  EXPECT_TRUE(comparison_json(c)["by_kind"].contains("gemm"));
  EXPECT_FALSE(comparison_json(c)["by_kind"].contains("copy"));
  ASSERT_FALSE(c.warnings.empty());
  EXPECT_NE(c.warnings[0].find("not scored"), std::string::npos);
}

TEST(CompareTraces, WarnsWhenUnitsLookWrong) {
  TraceFile p = trace("p.json", {span("x", "gemm", 0, 0, 0, 10)});
  TraceFile m = trace("m.json", {span("x", "gemm", 0, 0, 0, 10000)});  // written in ns
  Comparison c = compare_traces(p, m);
  bool unit_warning = std::any_of(c.warnings.begin(), c.warnings.end(),
                                  [](const std::string& w) { return w.find("microseconds") != std::string::npos; });
  EXPECT_TRUE(unit_warning);
}

TEST(CompareTraces, WarnsWhenSidesLookSwapped) {
  TraceFile p = trace("p.json", {span("x", "gemm", 0, 0, 0, 10)}, {{"source", "measured"}});
  TraceFile m = trace("m.json", {span("x", "gemm", 0, 0, 0, 10)}, {{"source", "predicted"}});
  Comparison c = compare_traces(p, m);
  EXPECT_EQ(std::count_if(c.warnings.begin(), c.warnings.end(),
                          [](const std::string& w) { return w.find("swapped") != std::string::npos; }),
            2);
}

TEST(CompareTraces, WarnsOfARankThatStartedTheMeasuredIterationLate) {
  const TraceFile p = trace("p.json", {span("x", "gemm", 0, 0, 0, 100000)});
  const auto measured = [](double late_us) {
    return trace(
        "m.json", {span("x", "gemm", 0, 0, 0, 100000), span("x", "gemm", 1, 0, late_us, 100000)},
        {{"source", "measured"}, {"rank_clocks", "shared"}, {"rank_start_offsets_us", {0, late_us}}});
  };
  const auto late_warnings = [](const Comparison& c) {
    std::vector<std::string> out;
    for (const std::string& w : c.warnings)
      if (w.find("left the barrier late") != std::string::npos) out.push_back(w);
    return out;
  };
  const std::vector<std::string> late = late_warnings(compare_traces(p, measured(9700)));
  ASSERT_EQ(late.size(), 1u);
  EXPECT_NE(late[0].find("rank 1 started the measured iteration 9.7 ms"), std::string::npos) << late[0];
  // 0.5 ms: under both the 1 ms and the 1 % of the iteration that a late start must pass.
  EXPECT_TRUE(late_warnings(compare_traces(p, measured(500))).empty());
}

TEST(CompareTraces, TopErrorOpsPreferTheCriticalPath) {
  // hidden [5,7) AllReduce is 10x slower measured but stays hidden: b is on the path, hidden is not.
  TraceFile p = trace("p.json", {span("a", "gemm", 0, 0, 0, 5), span("hidden", "allreduce", 0, 1, 5, 1),
                                 span("b", "gemm", 0, 0, 5, 10)});
  TraceFile m = trace("m.json", {span("a", "gemm", 0, 0, 0, 5), span("hidden", "allreduce", 0, 1, 5, 8),
                                 span("b", "gemm", 0, 0, 5, 11)});
  Comparison c = compare_traces(p, m);
  ASSERT_EQ(c.top_error_ops.size(), 3u);
  EXPECT_EQ(c.top_error_ops[0].id, "b");
  EXPECT_TRUE(c.top_error_ops[0].on_critical_path);
  EXPECT_EQ(c.top_error_ops[1].id, "a");
  EXPECT_EQ(c.top_error_ops[2].id, "hidden");
  EXPECT_FALSE(c.top_error_ops[2].on_critical_path);
}

}  // namespace
}  // namespace domino
