// compare_spread_test.cpp: measured traces that carry each op's duration over the iterations (args.dur_*):
// the comparison judges an op on its median there (or, asked, on the trace's one iteration), and reports
// how far one iteration strays (the spread) per op, per kind and in the printed table.
#include <gtest/gtest.h>

#include "sim/compare/compare.hpp"
#include "tests/compare/trace_builders.hpp"

namespace domino {
namespace {

using test::span;
using test::trace;

TraceEvent with_spread(TraceEvent e, int samples, double p10, double median, double p90) {
  e.spread = {samples, p10, median, p90};
  return e;
}

// Predicted: a 100 us GEMM and a 50 us norm. Measured on two ranks: the GEMM's one iteration took 150 and
// 130 us but its medians over 10 iterations are 104 and 108 (p10-p90 90-120 and 94-126); the norm has no
// spread recorded (an older trace), 60 and 40 us.
struct SpreadCase {
  TraceFile predicted = trace("p.json", {span("g", "gemm", 0, 0, 0, 100), span("n", "norm", 0, 0, 100, 50)},
                              {{"source", "predicted"}});
  TraceFile measured = trace("m.json",
                             {with_spread(span("g", "gemm", 0, 0, 0, 150), 10, 90, 104, 120),
                              with_spread(span("g", "gemm", 1, 0, 0, 130), 10, 94, 108, 126),
                              span("n", "norm", 0, 0, 150, 60), span("n", "norm", 1, 0, 130, 40)},
                             {{"source", "measured"}});
};

const OpComparison& op(const Comparison& c, const std::string& id) {
  for (const OpComparison& o : c.ops)
    if (o.id == id) return o;
  throw std::runtime_error("no op " + id);
}

TEST(CompareSpread, AnOpIsJudgedOnItsMedianOverTheIterations) {
  const SpreadCase t;
  const Comparison c = compare_traces(t.predicted, t.measured);
  const OpComparison& g = op(c, "g");
  EXPECT_DOUBLE_EQ(g.measured_us, 106);  // the ranks' medians 104 and 108, not 150 and 130
  EXPECT_NEAR(g.error_pct, 6, 1e-9);
  EXPECT_DOUBLE_EQ(g.measured_p10_us, 92);
  EXPECT_DOUBLE_EQ(g.measured_p90_us, 123);
  EXPECT_NEAR(g.spread_pct(), (123.0 - 92.0) / (2 * 106) * 100, 1e-9);
  const OpComparison& n = op(c, "n");
  EXPECT_DOUBLE_EQ(n.measured_us, 50);  // no spread: the iteration's durations, 60 and 40
  EXPECT_LT(n.spread_pct(), 0);
  EXPECT_NE(c.measured_durations.find("median over its 10 timed iterations"), std::string::npos) << c.measured_durations;
  ASSERT_EQ(c.by_kind.size(), 2u);
  EXPECT_EQ(c.by_kind[0].kind, "gemm");
  EXPECT_NEAR(c.by_kind[0].spread_pct, g.spread_pct(), 1e-9);
  EXPECT_LT(c.by_kind[1].spread_pct, 0);  // norm: unknown, not 0
  EXPECT_NEAR(c.op_spread_median_pct, g.spread_pct(), 1e-9);
}

TEST(CompareSpread, OneIterationUsesTheTracesOwnDurations) {
  const SpreadCase t;
  CompareOptions one;
  one.one_iteration = true;
  const Comparison c = compare_traces(t.predicted, t.measured, one);
  EXPECT_DOUBLE_EQ(op(c, "g").measured_us, 140);
  EXPECT_LT(op(c, "g").spread_pct(), 0);
  EXPECT_LT(c.op_spread_median_pct, 0);
  EXPECT_NE(c.measured_durations.find("one iteration"), std::string::npos);
}

TEST(CompareSpread, TableAndJsonShowTheSpread) {
  const SpreadCase t;
  const Comparison c = compare_traces(t.predicted, t.measured);
  const std::string table = comparison_table(c);
  EXPECT_NE(table.find("spread"), std::string::npos) << table;
  EXPECT_NE(table.find("92-123"), std::string::npos) << table;  // the GEMM's p10-p90 among the top ops
  const nlohmann::json j = comparison_json(c);
  EXPECT_NEAR(j.at("by_kind").at("gemm").at("spread_pct").get<double>(), op(c, "g").spread_pct(), 1e-9);
  EXPECT_TRUE(j.at("by_kind").at("norm").at("spread_pct").is_null());
  EXPECT_EQ(j.at("measured_durations"), c.measured_durations);
}

TEST(CompareSpread, TracesWithoutSpreadPrintNoSpreadColumn) {
  const SpreadCase t;
  const Comparison c = compare_traces(t.predicted, t.predicted);
  EXPECT_EQ(comparison_table(c).find("spread"), std::string::npos);
  EXPECT_EQ(c.measured_durations, "the trace's one iteration");
}

}  // namespace
}  // namespace domino
