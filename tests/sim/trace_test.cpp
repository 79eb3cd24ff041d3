// trace_test.cpp: the Chrome trace of a simulated timeline parses back with microsecond units, names
// its processes and threads, ties each AllReduce to its first waiter with a flow, and never overlaps two
// events on one track.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "sim/compare/compare.hpp"
#include "sim/compare/report_html.hpp"
#include "sim/engine/simulator.hpp"
#include "sim/trace/timeline.hpp"
#include "tests/sim/schedule_test_util.hpp"
#include "tests/sim/toy_schedule.hpp"

namespace domino {
namespace {

using nlohmann::json;

// memory 1e6 B/us, no launch cost, ring busbw 1e6 B/us at tp 2: D microseconds = D * 1e6 bytes.
Profile unit_profile() { return test::unit_bytes_profile(); }

Op make_op(int32_t index, Stream st, double us, std::vector<int32_t> deps) {
  Op op;
  op.index = index;
  op.layer = 0;
  op.block = Block::Mlp;
  op.name = st == Stream::Comm ? "ar" : "fc2";
  op.slice = static_cast<int8_t>(index);
  op.stream = st;
  op.kind = st == Stream::Comm ? OpKind::AllReduce : OpKind::Elementwise;
  op.code = st == Stream::Comm ? OpCode::AllReduce : OpCode::ResidualAdd;
  op.m = 16, op.n = 32;
  op.bytes = us * 1e6;
  op.deps = std::move(deps);
  return op;
}

Schedule toy_schedule() {
  Schedule s;
  s.model.name = "toy";
  s.model.tp = 2;
  s.plan.tp = 2;
  s.plan.strategy = "hand-built";
  s.ops.push_back(make_op(0, Stream::Compute, 100, {}));
  s.ops.push_back(make_op(1, Stream::Comm, 250, {0}));
  s.ops.push_back(make_op(2, Stream::Compute, 40, {}));
  s.ops.push_back(make_op(3, Stream::Compute, 10, {1}));
  s.ops.push_back(make_op(4, Stream::Compute, 10, {1}));  // a second waiter: no second flow
  return s;
}

std::vector<json> events_with(const json& trace, const std::string& ph) {
  std::vector<json> out;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == ph) out.push_back(e);
  }
  return out;
}

TEST(Trace, WrittenFileParsesBackInMicroseconds) {
  const Schedule s = toy_schedule();
  const SimResult r = simulate(s, CostModel(unit_profile()));
  const auto path = std::filesystem::temp_directory_path() / "domino_trace_test.json";
  write_trace(path.string(), s, r.timeline, json{{"profile", "unit"}});
  std::ifstream in(path);
  const json trace = json::parse(in);
  std::filesystem::remove(path);

  const auto xs = events_with(trace, "X");
  ASSERT_EQ(xs.size(), s.ops.size());
  std::map<int, json> by_op;
  for (const json& e : xs) by_op[e.at("args").at("op").get<int>()] = e;
  // The 250 us AllReduce starts when op 0 ends (100 us) and lasts 250 us: microseconds, not ms or ns.
  const json& ar = by_op.at(1);
  EXPECT_DOUBLE_EQ(ar.at("ts").get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(ar.at("dur").get<double>(), 250.0);
  EXPECT_EQ(ar.at("tid"), 1);
  EXPECT_EQ(ar.at("pid"), 0);
  EXPECT_EQ(ar.at("cat"), to_string(OpKind::AllReduce));
  EXPECT_EQ(ar.at("name"), op_id(s.ops[1]));
  EXPECT_DOUBLE_EQ(by_op.at(0).at("dur").get<double>(), 100.0);
  EXPECT_EQ(by_op.at(0).at("tid"), 0);
  for (const char* key : {"op", "layer", "phase", "block", "slice", "chunk", "code", "m", "n", "k", "flops", "bytes"}) {
    EXPECT_TRUE(ar.at("args").contains(key)) << key;
  }
  EXPECT_EQ(by_op.at(2).at("args").at("n"), 32);

  const json& d = trace.at("domino");
  EXPECT_EQ(d.at("source"), "predicted");
  EXPECT_EQ(d.at("model"), "toy");
  EXPECT_EQ(d.at("strategy"), "hand-built");
  EXPECT_EQ(d.at("tp"), 2);
  EXPECT_EQ(d.at("profile"), "unit");  // meta is merged in
  EXPECT_DOUBLE_EQ(d.at("iteration_time_us").get<double>(), 370.0);
  EXPECT_EQ(trace.at("displayTimeUnit"), "ns");
}

TEST(Trace, MeasuredSpreadOverIterationsRoundTrips) {
  const Schedule s = toy_schedule();
  Timeline t;
  t.source = "measured";
  t.ranks = 1;
  t.spans.push_back(
      {0, 0, 0, 120, {5, 90, 110, 140, 180, 112}});  // the mean above p90: one iteration stalled
  t.spans.push_back({1, 0, 120, 400, {}});  // no spread recorded: no dur_* args
  const auto path = (std::filesystem::temp_directory_path() / "domino_trace_spread.json").string();
  write_trace(path, s, t);
  const TraceFile back = read_trace(path);
  std::filesystem::remove(path);
  ASSERT_EQ(back.events.size(), 2u);
  const TraceEvent& gemm = back.events[0];
  EXPECT_EQ(gemm.spread.samples, 5);
  EXPECT_DOUBLE_EQ(gemm.spread.p10_us, 90);
  EXPECT_DOUBLE_EQ(gemm.spread.median_us, 110);
  EXPECT_DOUBLE_EQ(gemm.spread.p90_us, 140);
  ASSERT_TRUE(gemm.spread.has_mean());
  EXPECT_DOUBLE_EQ(gemm.spread.mean_us, 180);
  ASSERT_TRUE(gemm.spread.has_typical_mean());
  EXPECT_DOUBLE_EQ(gemm.spread.typical_mean_us, 112);
  EXPECT_DOUBLE_EQ(gemm.dur_us, 120);             // the representative iteration's own duration stays
  EXPECT_DOUBLE_EQ(gemm.typical_dur_us(), 110);   // ... but the median is what a model is judged on
  EXPECT_EQ(back.events[1].spread.samples, 0);
  EXPECT_FALSE(back.events[1].args.contains("dur_median"));
  EXPECT_FALSE(back.events[1].args.contains("dur_mean"));
  EXPECT_FALSE(back.events[1].spread.has_mean());
  EXPECT_FALSE(back.events[1].args.contains("dur_typical_mean"));
  EXPECT_FALSE(back.events[1].spread.has_typical_mean());
  EXPECT_DOUBLE_EQ(back.events[1].typical_dur_us(), 280);
}

TEST(Trace, NamesProcessesAndThreads) {
  const Schedule s = toy_schedule();
  const json trace = trace_json(s, simulate(s, CostModel(unit_profile())).timeline);
  std::map<std::string, std::string> names;
  for (const json& e : events_with(trace, "M")) {
    const std::string key = e.at("name").get<std::string>() + (e.contains("tid") ? std::to_string(e.at("tid").get<int>()) : "");
    names[key] = e.at("args").at("name");
  }
  EXPECT_EQ(names.at("process_name"), "rank 0 (predicted)");
  EXPECT_EQ(names.at("thread_name0"), "compute");
  EXPECT_EQ(names.at("thread_name1"), "communication");
}

TEST(Trace, OneFlowFromEachAllReduceToItsFirstWaiter) {
  const Schedule s = toy_schedule();
  const json trace = trace_json(s, simulate(s, CostModel(unit_profile())).timeline);
  const auto starts = events_with(trace, "s");
  const auto finishes = events_with(trace, "f");
  ASSERT_EQ(starts.size(), 1u);
  ASSERT_EQ(finishes.size(), 1u);
  EXPECT_EQ(starts[0].at("id"), finishes[0].at("id"));
  EXPECT_EQ(starts[0].at("tid"), 1);
  EXPECT_DOUBLE_EQ(starts[0].at("ts").get<double>(), 100.0);   // inside the AllReduce
  EXPECT_EQ(finishes[0].at("tid"), 0);
  EXPECT_DOUBLE_EQ(finishes[0].at("ts").get<double>(), 350.0);  // the start of op 3, the first waiter
}

TEST(Trace, BuiltScheduleHasNoOverlapOnATrack) {
  const ModelSpec m = default_model();
  const Schedule s = test::build_verified(m, make_strategy_plan("domino-ds", m));
  const CostModel cm(load_profile((std::filesystem::path(DOMINO_SOURCE_DIR) / "profiles" / "cpu-dev.yaml").string()));
  const json trace = trace_json(s, simulate(s, cm).timeline);
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> tracks;
  for (const json& e : events_with(trace, "X")) {
    const double ts = e.at("ts"), dur = e.at("dur");
    EXPECT_GE(dur, 0);
    tracks[{e.at("pid"), e.at("tid")}].push_back({ts, ts + dur});
  }
  for (auto& [key, spans] : tracks) {
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) EXPECT_LE(spans[i - 1].second, spans[i].first + 1e-9);
  }
  EXPECT_FALSE(events_with(trace, "s").empty());
}

// Every AllReduce names its reduction; only the cross-entropy's per-token maximum is not a sum.
TEST(Trace, AllReducesNameTheirReduction) {
  const ModelSpec m = default_model();
  const Schedule s = test::build_verified(m, make_strategy_plan("megatron-sync", m));
  const CostModel cm(load_profile((std::filesystem::path(DOMINO_SOURCE_DIR) / "profiles" / "cpu-dev.yaml").string()));
  const json trace = trace_json(s, simulate(s, cm).timeline);
  std::map<std::string, int> reductions;
  for (const json& e : events_with(trace, "X")) {
    const bool allreduce = e.at("cat") == "allreduce";
    EXPECT_EQ(e.at("args").contains("reduce"), allreduce) << e.at("name");
    if (!allreduce) continue;
    const std::string reduce = e.at("args").at("reduce");
    ++reductions[reduce];
    EXPECT_EQ(reduce == "max", e.at("name") == "head.fwd.loss.max.ar") << e.at("name");
  }
  EXPECT_EQ(reductions["max"], 1);
  EXPECT_EQ(reductions["sum"], 4 * m.layers + 3);
}

// Every op that waits for ops of the other stream lists them (args.deps, by index), as the schedule does.
TEST(Trace, OpsListTheirCrossStreamDeps) {
  const ModelSpec m = default_model();
  const Schedule s = test::build_verified(m, make_strategy_plan("domino-deep", m));
  const CostModel cm(
      load_profile((std::filesystem::path(DOMINO_SOURCE_DIR) / "profiles" / "cpu-dev.yaml").string()));
  const json trace = trace_json(s, simulate(s, cm).timeline);
  size_t with_deps = 0;
  for (const json& e : events_with(trace, "X")) {
    const Op& op = s.ops.at(e.at("args").at("op").get<size_t>());
    if (op.deps.empty()) {
      EXPECT_FALSE(e.at("args").contains("deps")) << e.at("name");
      continue;
    }
    EXPECT_EQ(e.at("args").at("deps").get<std::vector<int32_t>>(), op.deps) << e.at("name");
    ++with_deps;
  }
  EXPECT_GT(with_deps, size_t(2 * m.layers));
}

// Sequence parallelism's collectives in a trace: their kinds as `cat`, the ReduceScatter's reduction, a flow
// from each to its first waiter; read back and compared, each kind is scored in its own row and drawn in its
// own colour.
TEST(Trace, SequenceParallelCollectivesRoundTripAndAreScoredPerKind) {
  Schedule s = toy_schedule();
  s.ops[1].kind = OpKind::AllGather;
  s.ops[1].code = OpCode::AllGather;
  s.ops.push_back(make_op(5, Stream::Comm, 30, {2}));
  s.ops[5].kind = OpKind::ReduceScatter;
  s.ops[5].code = OpCode::ReduceScatter;
  s.ops.push_back(make_op(6, Stream::Compute, 5, {5}));
  Profile p = unit_profile();
  p.intra_node.allgather = p.intra_node.reduce_scatter = AlgorithmCurves{p.intra_node.ring()};
  const Timeline predicted = simulate(s, CostModel(p)).timeline;
  const json trace = trace_json(s, predicted);
  EXPECT_EQ(events_with(trace, "s").size(), 2u);  // one flow from each collective
  const TraceFile back = read_trace_string(trace.dump(), "sp.json");
  std::map<std::string, const TraceEvent*> by_kind;
  for (const TraceEvent& e : back.events) by_kind[e.kind] = &e;
  ASSERT_EQ(by_kind.count("allgather"), 1u);
  ASSERT_EQ(by_kind.count("reducescatter"), 1u);
  EXPECT_EQ(by_kind["allgather"]->stream, 1);
  EXPECT_DOUBLE_EQ(by_kind["allgather"]->dur_us, 125);  // 250e6 B at tp 2: half of it over 1e6 B/us
  EXPECT_FALSE(by_kind["allgather"]->args.contains("reduce"));
  EXPECT_EQ(by_kind["reducescatter"]->args.at("reduce"), "sum");

  // The measured side: the AllGather took 10% longer.
  Timeline measured = predicted;
  measured.source = "measured";
  for (OpSpan& span : measured.spans)
    if (span.op == 1) span.end_us += 0.1 * (span.end_us - span.start_us);
  const Comparison c = compare_traces(back, read_trace_string(trace_json(s, measured).dump(), "m.json"));
  std::map<std::string, KindError> errors;
  for (const KindError& k : c.by_kind) errors[k.kind] = k;
  ASSERT_EQ(errors.count("allgather"), 1u);
  EXPECT_NEAR(errors["allgather"].median_pct, 10, 1e-9);
  EXPECT_NEAR(errors.at("reducescatter").median_pct, 0, 1e-9);
  EXPECT_STRNE(kind_colour("allgather"), kind_colour("reducescatter"));
  EXPECT_STRNE(kind_colour("allgather"), kind_colour("allreduce"));
  EXPECT_STRNE(kind_colour("reducescatter"), kind_colour("nothing"));  // not the fallback colour
}

// A prediction and a run of another schedule share op ids ("L0.fwd.attn.qkv"), and their op-by-op errors
// would read as the cost model's: compare refuses them and names what differs; the same schedule compares,
// and traces written before the fingerprint still do.
TEST(Trace, CompareRefusesTracesOfDifferentSchedules) {
  const ModelSpec m = test::tiny_gpt();
  ModelSpec longer = m;
  longer.seq_len *= 2;
  const auto traced = [](const ModelSpec& model, const std::string& strategy, const char* source) {
    const Schedule s = test::build_verified(model, make_strategy_plan(strategy, model));
    Timeline t = simulate(s, CostModel(unit_profile())).timeline;
    t.source = source;
    return trace_json(s, t);
  };
  const json predicted = traced(m, "megatron-sync", "predicted");
  const TraceFile pred = read_trace_string(predicted.dump(), "p.json");
  const auto compare_with = [&](const json& measured) {
    return compare_traces(pred, read_trace_string(measured.dump(), "m.json"));
  };
  EXPECT_NO_THROW(compare_with(traced(m, "megatron-sync", "measured")));
  const auto refusal = [&](const json& measured) {
    try {
      compare_with(measured);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadInput);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(refusal(traced(longer, "megatron-sync", "measured")).find("seq_len"), std::string::npos);
  EXPECT_NE(refusal(traced(m, "domino-deep", "measured"))
                .find("strategy megatron-sync predicted, domino-deep measured"),
            std::string::npos)
      << refusal(traced(m, "domino-deep", "measured"));
  json old = traced(longer, "megatron-sync", "measured");
  old["domino"].erase("schedule_fingerprint");
  EXPECT_NO_THROW(compare_with(old));
}

}  // namespace
}  // namespace domino
