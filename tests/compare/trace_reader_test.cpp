// trace_reader_test.cpp: read_trace on the fixture traces, and every malformed input it must refuse
// with a BadInput that names the file (and the event, where there is one).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "sim/base/error.hpp"
#include "sim/trace/timeline.hpp"
#include "tests/compare/trace_builders.hpp"

namespace domino {
namespace {

TEST(TraceReader, ReadsPredictedFixture) {
  TraceFile t = read_trace(test::trace_data("predicted_small.json"));
  EXPECT_EQ(t.source, "predicted");
  ASSERT_EQ(t.events.size(), 18u);
  const TraceEvent& first = t.events.front();
  EXPECT_EQ(first.id, "L0.fwd.attn.qkv.s0");
  EXPECT_EQ(first.kind, "gemm");
  EXPECT_EQ(first.rank, 0);
  EXPECT_EQ(first.stream, 0);
  EXPECT_DOUBLE_EQ(first.start_us, 0);
  EXPECT_DOUBLE_EQ(first.dur_us, 10);
  EXPECT_DOUBLE_EQ(first.flops, 2.0 * 256 * 384 * 128);
  EXPECT_EQ(first.args.at("code"), "MatMul");
  EXPECT_DOUBLE_EQ(t.meta.at("iteration_time_us").get<double>(), 140.0);
  // Flow events are kept (for the merged trace); metadata events are not.
  EXPECT_EQ(t.other_events.size(), 4u);
}

TEST(TraceReader, ReadsMeasuredFixtureWithAllRanks) {
  TraceFile t = read_trace(test::trace_data("measured_small.json"));
  EXPECT_EQ(t.source, "measured");
  int per_rank[2] = {0, 0};
  int comm = 0;
  for (const TraceEvent& e : t.events) {
    ASSERT_GE(e.rank, 0);
    ASSERT_LE(e.rank, 1);
    ++per_rank[e.rank];
    comm += e.stream == 1;
  }
  EXPECT_EQ(per_rank[0], 18);
  EXPECT_EQ(per_rank[1], 18);
  EXPECT_EQ(comm, 8);
}

class MalformedTrace : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    auto dir = std::filesystem::temp_directory_path() / ("domino_reader_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
    std::filesystem::create_directories(dir);
    std::string path = (dir / name).string();
    std::ofstream(path) << text;
    return path;
  }
  // Expects read_trace to throw BadInput whose message holds the path and every one of `needles`.
  void expect_bad(const std::string& name, const std::string& text, std::vector<std::string> needles) {
    std::string path = write(name, text);
    try {
      read_trace(path);
      FAIL() << name << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadInput) << e.what();
      std::string what = e.what();
      EXPECT_NE(what.find(path), std::string::npos) << what;
      for (const auto& n : needles) EXPECT_NE(what.find(n), std::string::npos) << "missing '" << n << "' in: " << what;
    }
  }
  static std::string with_event(const std::string& event) {
    return R"({"traceEvents": [{"name":"a","cat":"gemm","ph":"X","ts":0,"dur":1,"pid":0,"tid":0}, )" + event + "]}";
  }
};

TEST_F(MalformedTrace, NotJson) { expect_bad("not_json.json", "{\"traceEvents\": [", {"not a JSON trace", "line"}); }
TEST_F(MalformedTrace, EmptyFile) { expect_bad("empty.json", "", {"not a JSON trace"}); }
TEST_F(MalformedTrace, TopLevelArray) { expect_bad("array.json", "[]", {"expected a JSON object"}); }
TEST_F(MalformedTrace, MissingTraceEvents) { expect_bad("no_events.json", R"({"events": []})", {"missing \"traceEvents\""}); }
TEST_F(MalformedTrace, TraceEventsNotArray) { expect_bad("obj_events.json", R"({"traceEvents": {}})", {"must be an array"}); }
TEST_F(MalformedTrace, NoCompleteEvents) {
  expect_bad("only_meta.json", R"({"traceEvents": [{"ph":"M","name":"process_name","pid":0,"args":{"name":"x"}}]})",
             {"no complete"});
}
TEST_F(MalformedTrace, EventMissingDur) {
  expect_bad("no_dur.json", with_event(R"({"name":"L0.fwd.mlp.fc1","cat":"gemm","ph":"X","ts":3,"pid":0,"tid":0})"),
             {"traceEvents[1]", "L0.fwd.mlp.fc1", "missing field \"dur\""});
}
TEST_F(MalformedTrace, EventMissingName) {
  expect_bad("no_name.json", with_event(R"({"cat":"gemm","ph":"X","ts":3,"dur":1,"pid":0,"tid":0})"),
             {"traceEvents[1]", "missing field \"name\""});
}
TEST_F(MalformedTrace, EventMissingPhase) {
  expect_bad("no_ph.json", with_event(R"({"name":"b","cat":"gemm","ts":3,"dur":1,"pid":0,"tid":0})"), {"\"ph\""});
}
TEST_F(MalformedTrace, NegativeDuration) {
  expect_bad("neg_dur.json", with_event(R"({"name":"b","cat":"gemm","ph":"X","ts":3,"dur":-2,"pid":0,"tid":0})"),
             {"negative \"dur\"", "(b)"});
}
TEST_F(MalformedTrace, TimestampAsString) {
  expect_bad("ts_string.json", with_event(R"({"name":"b","cat":"gemm","ph":"X","ts":"3","dur":1,"pid":0,"tid":0})"),
             {"\"ts\" must be a number"});
}
TEST_F(MalformedTrace, UnknownStream) {
  expect_bad("tid.json", with_event(R"({"name":"b","cat":"gemm","ph":"X","ts":3,"dur":1,"pid":0,"tid":7})"), {"\"tid\""});
}
TEST_F(MalformedTrace, NegativeRank) {
  expect_bad("pid.json", with_event(R"({"name":"b","cat":"gemm","ph":"X","ts":3,"dur":1,"pid":-1,"tid":0})"), {"\"pid\""});
}
TEST_F(MalformedTrace, ArgsNotObject) {
  expect_bad("args.json", with_event(R"({"name":"b","cat":"gemm","ph":"X","ts":3,"dur":1,"pid":0,"tid":0,"args":[1]})"),
             {"\"args\" must be an object"});
}
TEST_F(MalformedTrace, DuplicateOpOnOneRank) {
  expect_bad("dup.json", with_event(R"({"name":"a","cat":"gemm","ph":"X","ts":3,"dur":1,"pid":0,"tid":0})"),
             {"appears twice on rank 0"});
}
TEST_F(MalformedTrace, MetaNotObject) {
  expect_bad("meta.json", R"({"traceEvents": [{"name":"a","cat":"gemm","ph":"X","ts":0,"dur":1,"pid":0,"tid":0}], "domino": 3})",
             {"\"domino\" must be an object"});
}

TEST_F(MalformedTrace, DurationSpreadIncomplete) {
  expect_bad("spread_part.json",
             with_event(R"({"name":"b","cat":"gemm","ph":"X","ts":3,"dur":1,"pid":0,"tid":0,"args":{"dur_median":1}})"),
             {"(b)", "go together"});
}
TEST_F(MalformedTrace, DurationSpreadOutOfOrder) {
  expect_bad("spread_order.json", with_event(R"({"name":"b","cat":"gemm","ph":"X","ts":3,"dur":1,"pid":0,"tid":0,
             "args":{"dur_iterations":4,"dur_p10":2,"dur_median":1,"dur_p90":3}})"),
             {"dur_p10 <= dur_median <= dur_p90"});
}
TEST_F(MalformedTrace, DurationMeanWithoutTheSpread) {
  expect_bad(
      "spread_mean_alone.json",
      with_event(
          R"({"name":"b","cat":"gemm","ph":"X","ts":3,"dur":1,"pid":0,"tid":0,"args":{"dur_mean":1}})"),
      {"(b)", "dur_mean needs"});
}
TEST_F(MalformedTrace, DurationMeanNegative) {
  expect_bad("spread_mean_neg.json",
             with_event(R"({"name":"b","cat":"gemm","ph":"X","ts":3,"dur":1,"pid":0,"tid":0,
             "args":{"dur_iterations":4,"dur_p10":1,"dur_median":1,"dur_p90":3,"dur_mean":-2}})"),
             {"dur_mean must be a time from 0 to 1e12 us"});
}
TEST_F(MalformedTrace, DurationTypicalMeanWithoutTheSpread) {
  expect_bad("spread_typical_alone.json",
             with_event(R"({"name":"b","cat":"gemm","ph":"X","ts":3,"dur":1,"pid":0,"tid":0,
             "args":{"dur_typical_mean":1}})"),
             {"(b)", "dur_typical_mean needs"});
}
TEST_F(MalformedTrace, DurationTypicalMeanNotATime) {
  expect_bad("spread_typical_bad.json",
             with_event(R"({"name":"b","cat":"gemm","ph":"X","ts":3,"dur":1,"pid":0,"tid":0,
             "args":{"dur_iterations":4,"dur_p10":1,"dur_median":1,"dur_p90":3,"dur_typical_mean":"x"}})"),
             {"dur_typical_mean must be a time from 0 to 1e12 us"});
}
// A time no training step has (1e300 us) would print as hundreds of digits: refused where it is read.
TEST_F(MalformedTrace, TimeBeyondAnyTrainingStep) {
  expect_bad("ts_huge.json",
             with_event(R"({"name":"b","cat":"gemm","ph":"X","ts":1e300,"dur":1,"pid":0,"tid":0})"),
             {"(b)", "beyond 1e12 us"});
  expect_bad("dur_huge.json",
             with_event(R"({"name":"b","cat":"gemm","ph":"X","ts":3,"dur":2e12,"pid":0,"tid":0})"),
             {"(b)", "beyond 1e12 us"});
}
TEST_F(MalformedTrace, DurationSpreadWithoutIterations) {
  expect_bad("spread_n.json", with_event(R"({"name":"b","cat":"gemm","ph":"X","ts":3,"dur":1,"pid":0,"tid":0,
             "args":{"dur_iterations":0,"dur_p10":1,"dur_median":1,"dur_p90":1}})"),
             {"dur_iterations must be a positive integer"});
}

// A measured trace's mean iteration is the mean of its timed iterations; a prediction (no samples) has none;
// a list that is not of times is refused with the trace's path.
TEST(TraceReader, MeanIterationOfTheTimedIterations) {
  EXPECT_DOUBLE_EQ(mean_iteration_us(read_trace(test::trace_data("measured_small.json"))), 481.0 / 3.0);
  EXPECT_EQ(mean_iteration_us(read_trace(test::trace_data("predicted_small.json"))), 0);
  TraceFile t = read_trace(test::trace_data("measured_small.json"));
  for (const nlohmann::json& bad :
       {nlohmann::json("158"), nlohmann::json{158.0, 0.0}, nlohmann::json{158.0, "x"}}) {
    t.meta["iteration_samples_us"] = bad;
    try {
      mean_iteration_us(t);
      ADD_FAILURE() << "accepted " << bad.dump();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadInput);
      EXPECT_NE(std::string(e.what()).find("measured_small.json: domino.iteration_samples_us"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(TraceReader, MissingFileIsBadInput) {
  try {
    read_trace("/nonexistent/dir/trace.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/trace.json"), std::string::npos);
  }
}

TEST(TraceReader, SameOpOnTwoRanksIsFine) {
  auto path = std::filesystem::temp_directory_path() / "domino_reader_two_ranks.json";
  std::ofstream(path) << R"({"traceEvents": [{"name":"a","cat":"gemm","ph":"X","ts":0,"dur":1,"pid":0,"tid":0},
    {"name":"a","cat":"gemm","ph":"X","ts":0.5,"dur":1.5,"pid":1,"tid":0}]})";
  TraceFile t = read_trace(path.string());
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.events[1].rank, 1);
  EXPECT_DOUBLE_EQ(t.events[1].dur_us, 1.5);
  EXPECT_TRUE(t.source.empty());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace domino
