// compare_fixture_test.cpp: domino-compare's figures on the fixture traces (tests/data/traces), a
// two-layer forward pass with sliced attention, known by hand:
//   predicted (rank 0 only): 140 us, AllReduces 8 us each, ar.s0 hidden under qkv.s1, the other three
//   exposed -> comm 32, exposed 24, overlap 0.25.
//   measured (ranks 0 and 1, identical but fc1 = 12 / 15 us): comm 38, exposed 28 on both ranks;
//   head.fwd.loss was renamed head.fwd.xent, so each side has one op of its own.
//   Per-op errors (median over ranks): 0,0,0,0, 10,10,10, 12.5, 20,20,20, 25,25,25,25, 50,50 ->
//   median 20, p90 35 (position 14.4 of 16: 25 + 0.4 * 25).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "sim/compare/compare.hpp"
#include "tests/compare/trace_builders.hpp"
#include "sim/base/files.hpp"

namespace domino {
namespace {

class FixtureCompare : public ::testing::Test {
 protected:
  TraceFile predicted = read_trace(test::trace_data("predicted_small.json"));
  TraceFile measured = read_trace(test::trace_data("measured_small.json"));
  Comparison c = compare_traces(predicted, measured);

  const OpComparison& op(const std::string& id) {
    for (const auto& o : c.ops)
      if (o.id == id) return o;
    throw std::runtime_error("no aligned op " + id);
  }
};

TEST_F(FixtureCompare, AlignsOpsById) {
  EXPECT_EQ(c.ops.size(), 17u);
  EXPECT_EQ(c.ops.front().id, "L0.fwd.attn.qkv.s0");  // predicted start order
  EXPECT_EQ(c.ops.back().id, "L0.opt.adam");
  EXPECT_DOUBLE_EQ(op("L0.fwd.mlp.fc1").measured_us, 13.5);  // median of ranks 0 and 1
  EXPECT_DOUBLE_EQ(op("L0.fwd.mlp.fc1").error_pct, 12.5);
  EXPECT_DOUBLE_EQ(op("L0.fwd.mlp.gelu").error_pct, 50);
  EXPECT_DOUBLE_EQ(op("L0.fwd.mlp.ar").delta_us(), -2);
}

TEST_F(FixtureCompare, ReportsOpsOnOneSideOnly) {
  EXPECT_EQ(c.only_in_predicted, (std::vector<std::string>{"head.fwd.loss"}));
  EXPECT_EQ(c.only_in_measured, (std::vector<std::string>{"head.fwd.xent"}));
  std::string table = comparison_table(c);
  EXPECT_NE(table.find("ops only in predicted: 1 (head.fwd.loss)"), std::string::npos) << table;
  EXPECT_NE(table.find("ops only in measured:  1 (head.fwd.xent)"), std::string::npos) << table;
}

// The prediction's iteration from its meta; the measurement's is the mean of its timed iterations (158, 160
// and 163 us), not the median (160) its meta also records.
TEST_F(FixtureCompare, IterationTimeFromMetaAndFromTheTimedIterations) {
  EXPECT_EQ(c.predicted.iteration_from, "meta");
  EXPECT_DOUBLE_EQ(c.predicted.iteration_us, 140);
  EXPECT_EQ(c.measured.iteration_from, "samples");
  EXPECT_DOUBLE_EQ(c.measured.iteration_us, 481.0 / 3.0);
  EXPECT_NEAR(c.iteration_error_pct, 100.0 * (481.0 / 3.0 - 140) / 140, 1e-9);
}

TEST_F(FixtureCompare, OpErrorStatistics) {
  EXPECT_EQ(c.scored_ops, 17);
  EXPECT_DOUBLE_EQ(c.op_error_median_pct, 20);
  EXPECT_NEAR(c.op_error_p90_pct, 35, 1e-9);
  std::map<std::string, KindError> kinds;
  for (const auto& k : c.by_kind) kinds[k.kind] = k;
  ASSERT_EQ(kinds.size(), 5u);  // the loss op is unmatched, so not scored
  EXPECT_EQ(kinds["gemm"].count, 8);
  EXPECT_DOUBLE_EQ(kinds["gemm"].median_pct, 10);
  EXPECT_NEAR(kinds["gemm"].p90_pct, 14.75, 1e-9);  // 12.5 + 0.3 * (20 - 12.5)
  EXPECT_EQ(kinds["attention"].count, 3);
  EXPECT_DOUBLE_EQ(kinds["attention"].median_pct, 20);
  EXPECT_EQ(kinds["allreduce"].count, 4);
  EXPECT_DOUBLE_EQ(kinds["allreduce"].median_pct, 25);
  EXPECT_NEAR(kinds["allreduce"].p90_pct, 42.5, 1e-9);
  EXPECT_DOUBLE_EQ(kinds["activation"].median_pct, 50);
}

TEST_F(FixtureCompare, ExposedCommunicationAndOverlap) {
  EXPECT_DOUBLE_EQ(c.predicted.comm_busy_us, 32);
  EXPECT_DOUBLE_EQ(c.predicted.exposed_comm_us, 24);
  EXPECT_DOUBLE_EQ(c.predicted.overlap_fraction, 0.25);
  EXPECT_DOUBLE_EQ(c.measured.comm_busy_us, 38);
  EXPECT_DOUBLE_EQ(c.measured.exposed_comm_us, 28);
  EXPECT_NEAR(c.measured.overlap_fraction, 10.0 / 38.0, 1e-12);
}

TEST_F(FixtureCompare, CriticalPaths) {
  const std::vector<std::string> expected = {
      "L0.fwd.attn.qkv.s0", "L0.fwd.attn.core.s0", "L0.fwd.attn.proj.s0", "L0.fwd.attn.qkv.s1",
      "L0.fwd.attn.core.s1", "L0.fwd.attn.proj.s1", "L0.fwd.attn.ar.s1", "L0.fwd.mlp.fc1",
      "L0.fwd.mlp.gelu", "L0.fwd.mlp.fc2", "L0.fwd.mlp.ar", "L1.fwd.attn.qkv", "L1.fwd.attn.core",
      "L1.fwd.attn.proj", "L1.fwd.attn.ar", "head.fwd.loss", "L0.opt.adam"};
  EXPECT_EQ(c.predicted.critical_path, expected);
  std::vector<std::string> measured_expected = expected;
  measured_expected[15] = "head.fwd.xent";
  EXPECT_EQ(c.measured.critical_path, measured_expected);  // waits start 1 us after the AllReduce ends
  EXPECT_EQ(c.measured.critical_rank, 1);                   // rank 1 finishes last
  EXPECT_FALSE(op("L0.fwd.attn.ar.s0").on_critical_path);    // hidden on both sides
}

TEST_F(FixtureCompare, TopErrorOps) {
  ASSERT_EQ(c.top_error_ops.size(), 10u);
  EXPECT_EQ(c.top_error_ops[0].id, "L1.fwd.attn.ar");
  EXPECT_DOUBLE_EQ(c.top_error_ops[0].delta_us(), 4);
  EXPECT_EQ(c.top_error_ops[1].id, "L0.opt.adam");
  // ar.s0 is 2 us off, more than several listed ops, but hidden: it does not move the iteration time.
  for (const auto& o : c.top_error_ops) {
    EXPECT_NE(o.id, "L0.fwd.attn.ar.s0");
    EXPECT_TRUE(o.on_critical_path) << o.id;
  }
}

TEST_F(FixtureCompare, JsonHasStableKeys) {
  nlohmann::json j = comparison_json(c);
  for (const char* key : {"iteration_time_predicted_us", "iteration_time_measured_us", "iteration_time_error_pct",
                          "op_error_median_pct", "op_error_p90_pct", "by_kind", "exposed_comm_us", "overlap_fraction",
                          "only_in_predicted", "only_in_measured", "top_error_ops", "critical_path"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_DOUBLE_EQ(j["op_error_median_pct"].get<double>(), 20);
  EXPECT_EQ(j["by_kind"]["gemm"]["count"], 8);
  EXPECT_DOUBLE_EQ(j["exposed_comm_us"]["measured"].get<double>(), 28);
  EXPECT_EQ(j["critical_path"]["predicted"].size(), 17u);
  EXPECT_EQ(j["top_error_ops"][0]["id"], "L1.fwd.attn.ar");
  EXPECT_EQ(j["only_in_measured"][0], "head.fwd.xent");
}

TEST_F(FixtureCompare, RankZeroOnly) {
  Comparison r0 = compare_traces(predicted, measured, CompareOptions{0});
  for (const auto& o : r0.ops)
    if (o.id == "L0.fwd.mlp.fc1") {
      EXPECT_DOUBLE_EQ(o.error_pct, 0);  // rank 0 ran fc1 in 12 us, as predicted
    }
  EXPECT_EQ(r0.measured.critical_rank, 0);
}

TEST_F(FixtureCompare, MergedTraceHasBothSidesAsProcesses) {
  nlohmann::json merged = merged_trace_json(predicted, measured);
  std::map<int, std::string> names;
  std::map<int, int> complete;
  std::set<int64_t> flow_ids;
  for (const auto& e : merged["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") names[e["pid"]] = e["args"]["name"];
    if (e["ph"] == "X") ++complete[e["pid"].get<int>()];
    if (e["ph"] == "s") {
      EXPECT_TRUE(flow_ids.insert(e["id"].get<int64_t>()).second) << "flow ids must stay unique";
    }
  }
  EXPECT_EQ(names, (std::map<int, std::string>{{0, "rank 0 (predicted)"}, {1, "rank 0 (measured)"}, {3, "rank 1 (measured)"}}));
  EXPECT_EQ(complete, (std::map<int, int>{{0, 18}, {1, 18}, {3, 18}}));
  EXPECT_EQ(flow_ids.size(), 6u);  // 2 predicted + 2 per measured rank
  EXPECT_EQ(merged["domino"]["measured"]["source"], "measured");
  EXPECT_EQ(merged["displayTimeUnit"], "ns");
  // Round trip: the merged trace is itself a valid trace for read_trace.
  auto path = std::filesystem::temp_directory_path() / "domino_merged_roundtrip.json";
  write_file_atomic(path.string(), merged.dump());
  TraceFile back = read_trace(path.string());
  EXPECT_EQ(back.events.size(), 54u);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace domino
