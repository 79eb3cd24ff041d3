// calibrate_test.cpp: calibration round trip. A trace predicted by the simulator with a known
// profile is calibrated starting from a deliberately wrong profile; the result must predict every op of
// the trace again and recover the known figures.
#include "sim/fit/calibrate.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <tuple>

#include "sim/base/error.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/engine/simulator.hpp"
#include "sim/fit/calibrate_terms.hpp"
#include "sim/ir/gemm_blocks.hpp"
#include "tests/sim/calibration_profile.hpp"

namespace domino::prof {
namespace {

Profile known_profile() {
  // No interference: the simulator then reports each op's standalone time.
  return test::calibration_profile("known");
}

TraceFile predicted_trace(const Profile& truth, const Plan& plan, const ModelSpec& model, const std::string& path) {
  const Schedule s = build_schedule(model, plan);
  const SimResult r = simulate(s, CostModel(truth));
  write_trace(path, s, r.timeline);
  return read_trace(path);
}

// The same, through a temporary file of this name that is removed again.
TraceFile predicted_trace_read_back(const Profile& truth, const Plan& plan, const ModelSpec& model,
                                    const std::string& name) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  TraceFile trace = predicted_trace(truth, plan, model, path);
  std::filesystem::remove(path);
  return trace;
}

TEST(ProfilerCalibrate, RoundTripRecoversTheProfile) {
  const Profile truth = known_profile();
  const ModelSpec model = default_model();  // cpu-gpt, tp 2
  // A plan with two message sizes (whole and half blocks) so latency and bandwidth are both identifiable.
  const Plan plan = make_uniform_plan(model, BlockPlan{SplitDim::Batch, 1, 1, OverlapMode::None, false},
                                      BlockPlan{SplitDim::Batch, 2, 1, OverlapMode::None, false}, "custom");
  const std::string path = (std::filesystem::temp_directory_path() / "domino_calibrate_roundtrip.json").string();
  const TraceFile trace = predicted_trace(truth, plan, model, path);

  Profile wrong = truth;
  wrong.name = "wrong";
  wrong.memory = {25.0, 1.0, {}};
  for (auto& e : wrong.gemm[int(DType::FP32)]->efficiency) e.efficiency *= 0.6;
  for (auto& e : wrong.attention.efficiency) e.efficiency *= 1.5;
  wrong.intra_node = {20.0, 3.0, {}, 0};

  const CalibrationResult r = calibrate_profile(wrong, trace);
  const Profile& p = r.profile;
  EXPECT_NEAR(p.memory.bandwidth_gbps, 10.0, 0.2);
  EXPECT_NEAR(p.memory.launch_overhead_us, 4.0, 0.2);
  ASSERT_FALSE(p.memory.per_kind.empty());  // every kind with enough ops gets its own figures: here the truth's
  for (const auto& [kind, c] : p.memory.per_kind) {
    EXPECT_NEAR(c.bandwidth_gbps, 10.0, 0.2) << kind;
    EXPECT_NEAR(c.launch_overhead_us, 4.0, 0.2) << kind;
  }
  EXPECT_NEAR(p.intra_node.bus_bandwidth_gbps, 1.2, 0.03);
  EXPECT_NEAR(p.intra_node.latency_us, 60.0, 2.0);
  ASSERT_FALSE(r.errors.empty());
  EXPECT_EQ(r.errors.back().kind, "all");
  EXPECT_GT(r.errors.back().before, 0.1);  // the wrong profile was visibly wrong
  EXPECT_LT(r.errors.back().after, 0.01);  // and the calibrated one predicts the trace again

  // The calibrated profile predicts the whole iteration as the known one does.
  const Schedule s = build_schedule(model, plan);
  const double want = simulate(s, CostModel(truth)).iteration_us;
  EXPECT_NEAR(simulate(s, CostModel(p)).iteration_us, want, 0.01 * want);
  std::filesystem::remove(path);
}

// The round trip's plan (whole and half blocks: two message sizes) predicted with the known profile.
TraceFile known_trace(const std::string& name) {
  const ModelSpec model = default_model();
  const Plan plan = make_uniform_plan(model, BlockPlan{SplitDim::Batch, 1, 1, OverlapMode::None, false},
                                      BlockPlan{SplitDim::Batch, 2, 1, OverlapMode::None, false}, "custom");
  return predicted_trace_read_back(known_profile(), plan, model, name);
}

// How late rank 1 reaches the traces' collectives, in turn.
const double kSkewsUs[] = {400, 1000, 1600};

// Rank 1 reaches every AllReduce late by a varying skew (400, 1000, 1600 us in turn); rank 0 waits for it, so
// rank 0's span grows by the skew and rank 1's is the collective's own time. *allreduces: how many.
TraceFile skewed_trace(const std::string& name, int* allreduces = nullptr) {
  TraceFile trace = known_trace(name);
  const size_t n = trace.events.size();
  int ar = 0;
  for (size_t i = 0; i < n; ++i) {
    TraceEvent late = trace.events[i];
    late.rank = 1;
    if (late.kind == "allreduce") {
      const double s = kSkewsUs[ar++ % 3];
      late.start_us += s;
      trace.events[i].dur_us += s;
    }
    trace.events.push_back(late);
  }
  if (allreduces) *allreduces = ar;
  return trace;
}

// What skewed_trace's late rank costs the typical one, over its collectives: the mean of half the spreads.
double skewed_trace_sync_us(const std::string& name) {
  int ar = 0;
  skewed_trace(name, &ar);
  double sum = 0;
  for (int k = 0; k < ar; ++k) sum += kSkewsUs[k % 3] / 2;
  return sum / ar;
}

TEST(ProfilerCalibrate, ArrivalSkewOfAMultiRankTraceBecomesTheSyncTerm) {
  const Profile truth = known_profile();
  int ar = 0;
  const TraceFile trace = skewed_trace("domino_calibrate_skew.json", &ar);
  ASSERT_GE(ar, 9);
  const CalibrationResult r = calibrate_profile(truth, trace);
  // The last rank's start minus the median rank's: half the spread of the two ranks, its mean over the
  // collectives (neither the middle spread nor the whole spread).
  const double expected = skewed_trace_sync_us("domino_calibrate_skew.json");
  EXPECT_NE(expected, 500);
  EXPECT_NEAR(r.profile.intra_node.sync_us, expected, 1e-6);
  // The collective's own figures come from the rank that waited least: unchanged.
  EXPECT_NEAR(r.profile.intra_node.latency_us, 60.0, 2.0);
  EXPECT_NEAR(r.profile.intra_node.bus_bandwidth_gbps, 1.2, 0.03);
  EXPECT_NE(r.report.find("arrival skew"), std::string::npos);
}

// Each rank times its iteration from its own exit from the barrier before it; here rank 0 left it 10 ms
// before rank 1, so on their own clocks rank 1 seems 10 ms late at every collective. The collectives' common
// ends put the ranks on one clock: the skew is the one the trace had before the shift.
TEST(ProfilerCalibrate, ArrivalSkewIsMeasuredOnOneClockWhenARankLeftTheBarrierLate) {
  TraceFile trace = skewed_trace("domino_calibrate_clock.json");
  for (TraceEvent& e : trace.events)
    if (e.rank == 0) e.start_us += 10000;
  const CalibrationResult r = calibrate_profile(known_profile(), trace);
  EXPECT_NEAR(r.profile.intra_node.sync_us, skewed_trace_sync_us("domino_calibrate_clock.json"), 1e-6);
}

// An op that stalls in a few iterations keeps its median and raises its mean, and an iteration pays the
// means. Every op here runs 300 us longer on average than its median: a collective's sample is the
// iteration's duration plus that tail, a compute op's is its mean.
TEST(ProfilerCalibrate, SamplesAreWhatAnIterationPaysOnAverage) {
  TraceFile trace = skewed_trace("domino_calibrate_tail.json");
  for (TraceEvent& e : trace.events)
    e.spread = {20, 0.9 * e.dur_us, e.dur_us, 1.1 * e.dur_us, e.dur_us + 300};
  const Profile truth = known_profile();
  const calibration::TraceSamples in(truth, trace, 0);
  const CostModel cm(truth);
  int allreduces = 0, compute = 0;
  for (const calibration::Sample& s : in.samples) {
    const double own = cm.op_us(s.op, 2, 4);
    allreduces += s.op.kind == OpKind::AllReduce ? 1 : 0;
    compute += collective(s.op.kind) ? 0 : 1;
    // An AllReduce: rank 1's own time (rank 0 waited for it) and its tail; a compute op: its mean.
    EXPECT_NEAR(s.dur, own + 300, 1e-3 * own + 1e-6) << to_string(s.op.kind);
  }
  EXPECT_GE(allreduces, 9);
  EXPECT_GE(compute, 20);
}

// With the typical mean recorded (the mean over the middle half of the iterations by time), it replaces the
// whole mean: an op stalled in the one slow iteration no longer lifts what the fit sees. Here every op's mean
// is 5000 us above its median, its typical mean 100 us: compute ops are their typical means, collectives
// this iteration's duration plus the typical tail.
TEST(ProfilerCalibrate, SamplesAreWhatTheTypicalIterationsPay) {
  TraceFile trace = skewed_trace("domino_calibrate_typical.json");
  for (TraceEvent& e : trace.events)
    e.spread = {20, 0.9 * e.dur_us, e.dur_us, 1.1 * e.dur_us, e.dur_us + 5000, e.dur_us + 100};
  const Profile truth = known_profile();
  const calibration::TraceSamples in(truth, trace, 0);
  const CostModel cm(truth);
  int checked = 0;
  for (const calibration::Sample& s : in.samples) {
    const double own = cm.op_us(s.op, 2, 4);
    EXPECT_NEAR(s.dur, own + 100, 1e-3 * own + 1e-6) << to_string(s.op.kind);
    ++checked;
  }
  EXPECT_GE(checked, 29);
}

TEST(ProfilerCalibrate, SamplesTakeTheFastestRankOfAnAllReduce) {
  const TraceFile trace = skewed_trace("domino_calibrate_samples.json");
  const Profile truth = known_profile();
  const calibration::TraceSamples in(truth, trace, 0);
  EXPECT_EQ(in.tp, 2);  // from the trace's header
  ASSERT_FALSE(in.samples.empty());
  const CostModel cm(truth);
  int allreduces = 0;
  for (const calibration::Sample& s : in.samples) {
    if (s.op.kind != OpKind::AllReduce) {
      EXPECT_EQ(s.skew, -1);
      continue;
    }
    ++allreduces;
    const double own = cm.op_us(s.op, 2, 4);
    EXPECT_NEAR(s.dur, own, 1e-3 * own);  // rank 1's own time, not rank 0's wait
    // Half of 400, 1000 or 1600: the late rank's start after the median of the two ranks' starts.
    const double nearest = std::round(s.skew / 300 - 2.0 / 3) * 300 + 200;
    EXPECT_NEAR(s.skew, nearest, 1e-6);
    EXPECT_TRUE(nearest >= 200 && nearest <= 800) << s.skew;
  }
  EXPECT_GE(allreduces, 9);
}

// Three ranks run every compute op in 1x, 2x and 5x the predicted time: the sample is the median rank's 2x,
// as domino-compare scores it, not the slowest rank's 5x.
TEST(ProfilerCalibrate, ComputeSamplesAreTheMedianOverTheRanks) {
  TraceFile trace = known_trace("domino_calibrate_median_rank.json");
  const size_t n = trace.events.size();
  for (size_t i = 0; i < n; ++i)
    for (const auto& [rank, factor] : {std::pair{1, 2.0}, std::pair{2, 5.0}}) {
      TraceEvent e = trace.events[i];
      e.rank = rank;
      if (e.kind != "allreduce") e.dur_us *= factor;
      trace.events.push_back(e);
    }
  const Profile truth = known_profile();
  const calibration::TraceSamples in(truth, trace, 3);
  const CostModel cm(truth);
  int compute = 0;
  for (const calibration::Sample& s : in.samples) {
    if (collective(s.op.kind)) continue;
    ++compute;
    const double predicted = cm.op_us(s.op, 3, 4);
    EXPECT_NEAR(s.dur, 2 * predicted, 1e-3 * predicted) << to_string(s.op.kind);
  }
  EXPECT_GE(compute, 10);
}

TEST(ProfilerCalibrate, SyncAloneFitsTheSkewAndKeepsTheCollectiveFigures) {
  const TraceFile trace = skewed_trace("domino_calibrate_sync_only.json");
  Profile wrong = known_profile();
  wrong.intra_node = {20.0, 3.0, {}, 0};
  const CalibrationResult r = calibrate_profile(wrong, trace, 0, parse_calibration_scope("sync"));
  EXPECT_NEAR(r.profile.intra_node.sync_us, skewed_trace_sync_us("domino_calibrate_sync_only.json"), 1e-6);
  EXPECT_EQ(r.profile.intra_node.latency_us, 20.0);
  EXPECT_EQ(r.profile.intra_node.bus_bandwidth_gbps, 3.0);
  EXPECT_EQ(r.report.find("allreduce ("), std::string::npos);
}

TEST(ProfilerCalibrate, FitChangesOnlyTheNamedParts) {
  const TraceFile trace = known_trace("domino_calibrate_scope.json");
  Profile wrong = known_profile();
  wrong.memory = {25.0, 1.0, {}};
  wrong.intra_node = {20.0, 3.0, {}, 0};
  const Profile p = calibrate_profile(wrong, trace, 0, parse_calibration_scope("allreduce")).profile;
  EXPECT_NEAR(p.intra_node.bus_bandwidth_gbps, 1.2, 0.03);  // fitted
  EXPECT_EQ(p.memory.bandwidth_gbps, 25.0);                  // kept
  EXPECT_TRUE(p.memory.per_kind.empty());
  const CalibrationScope all = parse_calibration_scope("all");
  EXPECT_TRUE(all.memory && all.gemm && all.attention && all.allreduce && all.sync && all.interference);
  EXPECT_FALSE(all.comm_delay);  // only when named: it needs a trace with collectives beside compute
  EXPECT_TRUE(parse_calibration_scope("comm_delay").comm_delay);
  const CalibrationScope two = parse_calibration_scope("sync,gemm");
  EXPECT_TRUE(two.sync && two.gemm && !two.memory && !two.allreduce);
  EXPECT_THROW(parse_calibration_scope("sync,gemms"), Error);
}

// A GEMM table row of a whole blocked op (a plan slicing the sequence of several batch entries) is scaled
// with the rest of the table: a profile whose every GEMM row is 1.5x the truth's gets the truth's rows back.
TEST(ProfilerCalibrate, AWholeBlockedGemmRowIsScaledWithTheTable) {
  const ModelSpec model = default_model();
  const BlockPlan by_sequence{SplitDim::Sequence, 2, 1, OverlapMode::None, false};
  const Plan plan = make_uniform_plan(model, by_sequence, by_sequence, "custom");
  const Schedule s = build_schedule(model, plan);
  Profile truth = known_profile();
  const CostModel curve(truth);
  std::map<std::tuple<int64_t, int64_t, int64_t, GemmTranspose, int64_t>, double> rows;
  for (const Op& op : s.ops) {
    if (op.kind != OpKind::Gemm) continue;
    const Op block = gemm_block(op);
    // Blocks back to back run at 0.8x lone products (whole ops of one block: a row of their own shape).
    rows[{block.m, block.n, block.k, gemm_transpose(op.code), op.attrs.row_blocks}] =
        (op.attrs.row_blocks > 1 ? 0.8 : 1.0) * curve.op_us(op, 2, 4);
  }
  auto& table = truth.gemm[int(DType::FP32)]->table;
  int blocked = 0;
  for (const auto& [key, t] : rows) {
    const auto& [m, n, k, pair, blocks] = key;
    table.push_back({m, n, k, t, pair, blocks});
    blocked += blocks > 1;
  }
  ASSERT_GT(blocked, 0);
  std::sort(table.begin(), table.end(), gemm_row_less);
  const TraceFile trace = predicted_trace_read_back(truth, plan, model, "domino_calibrate_blocked.json");

  Profile wrong = truth;
  for (auto& r : wrong.gemm[int(DType::FP32)]->table) r.time_us *= 1.5;
  const Profile p = calibrate_profile(wrong, trace, 0, parse_calibration_scope("gemm")).profile;
  const auto& got = p.gemm[int(DType::FP32)]->table;
  ASSERT_EQ(got.size(), table.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].blocks, table[i].blocks);
    EXPECT_NEAR(got[i].time_us, table[i].time_us, 1e-6 * table[i].time_us) << i;
  }
  // A trace whose GEMM rows do not split into its blocks is refused with the op named.
  TraceFile bad = trace;
  for (TraceEvent& e : bad.events)
    if (e.args.contains("row_blocks")) {
      e.args["row_blocks"] = 3;
      break;
    }
  try {
    calibrate_profile(wrong, bad, 0, parse_calibration_scope("gemm"));
    FAIL() << "expected BadInput";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find("do not split into args.row_blocks 3"), std::string::npos)
        << e.what();
  }
}

// An attention opcode with figures of its own is scaled to its ops (here AttnFwd, measured 1.6x slower than
// the base profile says); the other opcode keeps following the curve, which is scaled to its ops alone.
TEST(ProfilerCalibrate, AttentionPerCodeFiguresAreScaledToTheirOwnOps) {
  Profile truth = known_profile();
  truth.attention.per_code["AttnFwd"] = {30, 0.5, 0.2};
  const TraceFile trace = predicted_trace_read_back(
      truth,
      make_uniform_plan(default_model(), BlockPlan{SplitDim::Sequence, 2, 1, OverlapMode::None, false},
                        BlockPlan{SplitDim::Batch, 1, 1, OverlapMode::None, false}, "custom"),
      default_model(), "domino_calibrate_attention_per_code.json");
  Profile base = truth;
  base.attention.per_code["AttnFwd"] = {30 / 1.6, 0.5 * 1.6, 0.2 * 1.6};
  for (auto& e : base.attention.efficiency) e.efficiency *= 1.25;
  const CalibrationResult r = calibrate_profile(base, trace, 0, parse_calibration_scope("attention"));
  const AttentionCost& fwd = r.profile.attention.per_code.at("AttnFwd");
  EXPECT_NEAR(fwd.launch_overhead_us, 30, 1e-6 * 30);
  EXPECT_NEAR(fwd.gflops, 0.5, 1e-6 * 0.5);
  EXPECT_NEAR(fwd.bandwidth_gbps, 0.2, 1e-6 * 0.2);
  ASSERT_EQ(r.profile.attention.efficiency.size(), truth.attention.efficiency.size());
  for (size_t i = 0; i < truth.attention.efficiency.size(); ++i)
    EXPECT_NEAR(r.profile.attention.efficiency[i].efficiency, truth.attention.efficiency[i].efficiency,
                0.02 * truth.attention.efficiency[i].efficiency);
  EXPECT_NE(r.report.find("attention AttnFwd"), std::string::npos) << r.report;
}

// With NVLS beside the ring, each AllReduce's old bandwidth term is that of the algorithm the base profile
// picks for it: here NVLS for every message (min_ranks 2 so that the 2-rank model can use it).
TEST(ProfilerCalibrate, AllReduceFitsTheAlgorithmTheOpsUsed) {
  Profile truth = known_profile();
  truth.intra_node.nvls = CollectiveCurve{30.0, 2.4, {}, 16, 2};  // faster than the ring at every size
  const ModelSpec model = default_model();
  const Plan plan = make_uniform_plan(model, BlockPlan{SplitDim::Batch, 1, 1, OverlapMode::None, false},
                                      BlockPlan{SplitDim::Batch, 2, 1, OverlapMode::None, false}, "custom");
  const TraceFile trace = predicted_trace_read_back(truth, plan, model, "domino_calibrate_nvls.json");
  Profile wrong = truth;
  wrong.intra_node.nvls->latency_us = 40.0;  // still below the ring's 60 us: NVLS stays the pick
  wrong.intra_node.nvls->bus_bandwidth_gbps = 1.2;
  const Profile p = calibrate_profile(wrong, trace, 0, parse_calibration_scope("allreduce")).profile;
  ASSERT_TRUE(p.intra_node.nvls.has_value());
  EXPECT_NEAR(p.intra_node.nvls->latency_us, 30.0, 1.0);
  EXPECT_NEAR(p.intra_node.nvls->bus_bandwidth_gbps, 2.4, 0.05);
  EXPECT_EQ(p.intra_node.latency_us, 60.0);  // no op used the ring: its latency is kept
  EXPECT_NEAR(p.intra_node.bus_bandwidth_gbps, 2.4, 0.05);  // its bandwidth scales with the same factor
  EXPECT_EQ(p.intra_node.nvls->sms, 16);
}

// A measured trace of AllGathers and ReduceScatters on 2 ranks, four sizes each, timed by `truth`: rank 1
// reaches each one late by 400, 1000 or 1600 us in turn, rank 0 waits for it.
TraceFile sp_collectives_trace(const Profile& truth) {
  TraceFile trace;
  trace.path = "sp-collectives.json";
  trace.meta = {{"tp", 2}};
  const CostModel cm(truth);
  double now = 0;
  int index = 0;
  for (OpKind kind : {OpKind::AllGather, OpKind::ReduceScatter})
    for (double bytes : {1e5, 4e5, 1.6e6, 6.4e6}) {
      const double own = cm.collective_cost(kind, bytes, 2, truth.devices_per_node).us,
                   skew = kSkewsUs[index % 3];
      for (int rank : {0, 1}) {
        TraceEvent e;
        e.id = "sp." + std::to_string(index);
        e.kind = to_string(kind);
        e.rank = rank;
        e.stream = 1;
        e.start_us = rank == 0 ? now : now + skew;
        e.dur_us = rank == 0 ? own + skew : own;
        e.bytes = bytes;
        e.args = {{"op", index}, {"m", 0}, {"n", 0}, {"k", 0}, {"flops", 0}, {"bytes", bytes}};
        trace.events.push_back(e);
      }
      now += own + skew + 10;
      ++index;
    }
  return trace;
}

TEST(ProfilerCalibrate, AllGatherAndReduceScatterCurvesAndTheirSkewAreCalibrated) {
  Profile truth = known_profile();
  truth.intra_node.allgather = AlgorithmCurves{CollectiveCurve{50, 0.9, {}, 0, 2}};
  truth.intra_node.reduce_scatter = AlgorithmCurves{CollectiveCurve{70, 0.7, {}, 0, 2}};
  const TraceFile trace = sp_collectives_trace(truth);
  Profile wrong = truth;
  wrong.intra_node.allgather = AlgorithmCurves{CollectiveCurve{20, 3.0, {}, 0, 2}};
  wrong.intra_node.reduce_scatter = AlgorithmCurves{CollectiveCurve{10, 0.2, {{1e5, 0.1}, {1e7, 0.4}}, 0, 2}};
  const CalibrationResult r =
      calibrate_profile(wrong, trace, 0, parse_calibration_scope("allgather,reducescatter,sync"));
  const CollectiveProfile& c = r.profile.intra_node;
  EXPECT_NEAR(c.allgather->ring.latency_us, 50, 1.0);
  EXPECT_NEAR(c.allgather->ring.bus_bandwidth_gbps, 0.9, 0.02);
  // The table keeps its shape: both rows scale by the one factor.
  ASSERT_EQ(c.reduce_scatter->ring.table.size(), 2u);
  EXPECT_NEAR(c.reduce_scatter->ring.table[1].bus_bandwidth_gbps / c.reduce_scatter->ring.table[0].bus_bandwidth_gbps,
              4.0, 1e-9);
  // The skew at these eight collectives: half the two ranks' spread (400, 1000, 1600, 400, ...), its mean.
  EXPECT_NEAR(c.sync_us, (3 * 200 + 3 * 500 + 2 * 800) / 8.0, 1e-6);
  EXPECT_NE(r.report.find("collective arrival skew"), std::string::npos) << r.report;
  EXPECT_EQ(c.latency_us, truth.intra_node.latency_us);  // no AllReduce in the trace
  bool allgather_row = false, reducescatter_row = false;
  for (const KindError& e : r.errors) {
    allgather_row = allgather_row || e.kind == "allgather";
    reducescatter_row = reducescatter_row || e.kind == "reducescatter";
  }
  EXPECT_TRUE(allgather_row && reducescatter_row);
  // A scope without them keeps their curves.
  const Profile kept = calibrate_profile(wrong, trace, 0, parse_calibration_scope("allreduce")).profile;
  EXPECT_EQ(kept.intra_node.allgather->ring.latency_us, 20);
}

// An opcode with figures of its own is calibrated even where the trace has one op of it (the embedding and
// the loss's reductions run once per iteration): its figures override its kind's, so a calibration that
// skipped it would leave the profiler's figures in force.
TEST(ProfilerCalibrate, AnOpcodeThatRunsOnceIsFittedToItsOp) {
  Profile truth = known_profile();
  truth.memory.per_code["EmbeddingFwd"] = {30.0, 4.0};
  truth.memory.per_code["LogitMax"] = {6.0, 4.0};
  const ModelSpec model = default_model();
  const Plan plan = make_uniform_plan(model, BlockPlan{SplitDim::Batch, 1, 1, OverlapMode::None, false},
                                      BlockPlan{SplitDim::Batch, 1, 1, OverlapMode::None, false}, "custom");
  const TraceFile trace = predicted_trace_read_back(truth, plan, model, "domino_calibrate_once.json");
  int once = 0;
  for (const TraceEvent& e : trace.events) once += e.args.value("code", "") == "EmbeddingFwd";
  ASSERT_EQ(once, 1) << "the premise: one EmbeddingFwd per iteration";

  Profile wrong = truth;
  wrong.memory.per_code["EmbeddingFwd"] = {90.0, 4.0};  // 3x too fast
  wrong.memory.per_code["LogitMax"] = {2.0, 4.0};       // 3x too slow
  const Profile p = calibrate_profile(wrong, trace).profile;
  EXPECT_NEAR(p.memory.per_code.at("EmbeddingFwd").bandwidth_gbps, 30.0, 0.3);
  EXPECT_NEAR(p.memory.per_code.at("LogitMax").bandwidth_gbps, 6.0, 0.06);
  EXPECT_DOUBLE_EQ(p.memory.per_code.at("EmbeddingFwd").launch_overhead_us, 4.0);  // one size: bandwidth alone
  const Schedule s = build_schedule(model, plan);
  const double want = simulate(s, CostModel(truth)).iteration_us;
  EXPECT_NEAR(simulate(s, CostModel(p)).iteration_us, want, 0.001 * want);
}

// The residual adds of a plan with column chunks: memory_rows gives their per-row term back from them (and
// their kind's), the whole-row figures held; the memory fit takes the per-row term off before it fits the
// bandwidth, and scales it with the bandwidth; a trace without chunks keeps the term and says so.
TEST(ProfilerCalibrate, AColumnChunksPerRowTermIsFittedOnTheChunksWhenNamed) {
  Profile truth = known_profile();
  truth.memory.per_code["ResidualAdd"] = {12.0, 1.0, 0.05};
  const ModelSpec model = default_model();
  const BlockPlan chunked{SplitDim::Batch, 1, 2, OverlapMode::None, false};
  const TraceFile trace = predicted_trace_read_back(
      truth, make_uniform_plan(model, chunked, chunked, "custom"), model, "domino_calibrate_chunk_rows.json");
  Profile wrong = truth;
  wrong.memory.per_code["ResidualAdd"].chunk_row_us = 0.2;
  const CalibrationResult rows = calibrate_profile(wrong, trace, 0, parse_calibration_scope("memory_rows"));
  EXPECT_NEAR(rows.profile.memory.per_code.at("ResidualAdd").chunk_row_us, 0.05, 1e-6);
  EXPECT_EQ(rows.profile.memory.per_code.at("ResidualAdd").bandwidth_gbps, 12.0);
  EXPECT_NE(rows.report.find("ResidualAdd"), std::string::npos) << rows.report;
  Profile slow = truth;
  slow.memory.per_code["ResidualAdd"].bandwidth_gbps = 6.0;  // the bytes 2x too slow, the rows right
  const Profile fitted = calibrate_profile(slow, trace, 0, parse_calibration_scope("memory")).profile;
  EXPECT_NEAR(fitted.memory.per_code.at("ResidualAdd").bandwidth_gbps, 12.0, 0.01);
  EXPECT_NEAR(fitted.memory.per_code.at("ResidualAdd").chunk_row_us, 0.025, 1e-4);  // scaled as the bytes
  const BlockPlan whole{SplitDim::Batch, 1, 1, OverlapMode::None, false};
  const TraceFile no_chunks = predicted_trace_read_back(
      truth, make_uniform_plan(model, whole, whole, "custom"), model, "domino_calibrate_no_chunks.json");
  const CalibrationResult kept =
      calibrate_profile(wrong, no_chunks, 0, parse_calibration_scope("memory_rows"));
  EXPECT_EQ(kept.profile.memory.per_code.at("ResidualAdd").chunk_row_us, 0.2);
  EXPECT_NE(kept.report.find("none in the trace"), std::string::npos) << kept.report;
  EXPECT_THROW(parse_calibration_scope("memory_row"), Error);
}

// A plan with column chunks: later_chunks gives the later chunks' bandwidth back from them (the whole-row
// figures and the per-row term held); the memory fit leaves the later chunks out of the bandwidth it fits and
// scales their bandwidth as the bytes'; a trace without chunks keeps it and says so.
TEST(ProfilerCalibrate, ALaterChunksBandwidthIsFittedOnTheLaterChunksWhenNamed) {
  Profile truth = known_profile();
  truth.memory.per_code["ResidualAdd"] = {12.0, 1.0, 0.05, 0, 18.0};
  const ModelSpec model = default_model();
  const BlockPlan chunked{SplitDim::Batch, 1, 2, OverlapMode::None, false};
  const TraceFile trace =
      predicted_trace_read_back(truth, make_uniform_plan(model, chunked, chunked, "custom"), model,
                                "domino_calibrate_later_chunks.json");
  Profile wrong = truth;
  wrong.memory.per_code["ResidualAdd"].later_chunk_bandwidth_gbps = 0;  // none: the later chunks run cold
  const CalibrationResult later = calibrate_profile(wrong, trace, 0, parse_calibration_scope("later_chunks"));
  const MemoryCost& add = later.profile.memory.per_code.at("ResidualAdd");
  EXPECT_NEAR(add.later_chunk_bandwidth_gbps, 18.0, 1e-6);
  EXPECT_EQ(add.bandwidth_gbps, 12.0);
  EXPECT_EQ(add.chunk_row_us, 0.05);
  EXPECT_NE(later.report.find("ResidualAdd"), std::string::npos) << later.report;
  Profile slow = truth;
  slow.memory.per_code["ResidualAdd"].bandwidth_gbps = 6.0;  // every byte 2x too slow
  slow.memory.per_code["ResidualAdd"].later_chunk_bandwidth_gbps = 9.0;
  const Profile fitted = calibrate_profile(slow, trace, 0, parse_calibration_scope("memory")).profile;
  EXPECT_NEAR(fitted.memory.per_code.at("ResidualAdd").bandwidth_gbps, 12.0, 0.01);
  EXPECT_NEAR(fitted.memory.per_code.at("ResidualAdd").later_chunk_bandwidth_gbps, 18.0, 0.02);
  const BlockPlan whole{SplitDim::Batch, 1, 1, OverlapMode::None, false};
  const TraceFile no_chunks =
      predicted_trace_read_back(truth, make_uniform_plan(model, whole, whole, "custom"), model,
                                "domino_calibrate_no_later_chunks.json");
  const CalibrationResult kept =
      calibrate_profile(slow, no_chunks, 0, parse_calibration_scope("later_chunks"));
  EXPECT_EQ(kept.profile.memory.per_code.at("ResidualAdd").later_chunk_bandwidth_gbps, 9.0);
  EXPECT_NE(kept.report.find("none in the trace"), std::string::npos) << kept.report;
}

// The per-row term keeps the chunks' total time: a trace whose chunks each took the term on their own rows
// (the time spread over the chunks, not on the first) gives the same term back, also without args.chunks
// (older traces), and the model charges it all to the first chunk, for the rows of both.
TEST(ProfilerCalibrate, TheChunksPerRowTermKeepsTheirTotalTimeAndGoesToTheFirstChunk) {
  Profile truth = known_profile();
  truth.memory.per_code["ResidualAdd"] = {12.0, 1.0, 0.05};
  const ModelSpec model = default_model();
  const BlockPlan chunked{SplitDim::Batch, 1, 2, OverlapMode::None, false};
  const Plan plan = make_uniform_plan(model, chunked, chunked, "custom");
  TraceFile trace = predicted_trace_read_back(truth, plan, model, "domino_calibrate_spread_chunks.json");
  int moved = 0;
  for (TraceEvent& e : trace.events) {
    if (e.args.value("code", "") != "ResidualAdd") continue;
    const double rows_us = 0.05 * e.args.at("m").get<double>();
    if (e.id.ends_with(".c0")) e.dur_us -= rows_us, ++moved;
    if (e.id.ends_with(".c1")) e.dur_us += rows_us;
  }
  ASSERT_GT(moved, 0) << "the premise: column chunks in the trace";
  Profile wrong = truth;
  wrong.memory.per_code["ResidualAdd"].chunk_row_us = 0.2;
  const CalibrationResult fitted = calibrate_profile(wrong, trace, 0, parse_calibration_scope("memory_rows"));
  EXPECT_NEAR(fitted.profile.memory.per_code.at("ResidualAdd").chunk_row_us, 0.05, 1e-6);
  // A trace written before args.chunks: the chunk count comes from the chunks that follow the first.
  TraceFile older = trace;
  for (TraceEvent& e : older.events) e.args.erase("chunks");
  const Profile from_older =
      calibrate_profile(wrong, older, 0, parse_calibration_scope("memory_rows")).profile;
  EXPECT_NEAR(from_older.memory.per_code.at("ResidualAdd").chunk_row_us, 0.05, 1e-6);
  const CostModel cm(fitted.profile);
  for (const Op& op : build_schedule(model, plan).ops) {
    if (op.code == OpCode::ResidualAdd && op.chunk >= 0) {
      EXPECT_NEAR(cm.op_us(op, model.tp, 8) - CostModel(truth).op_us(op, model.tp, 8), 0, 1e-9) << op_id(op);
    }
  }
}

// A trace simulated with a known delay beside compute gives the delay back from its collectives (the median
// one that ran mostly beside compute ran wholly beside it), the slowdown held; and the interference fit finds
// the slowdown again beside the delay. A trace without overlap leaves the delay as it was.
TEST(ProfilerCalibrate, CommDelayIsRecoveredFromTheCollectivesBesideCompute) {
  Profile truth = known_profile();
  truth.interference = {0.0, 0.3, 800.0};
  const ModelSpec model = default_model();
  const BlockPlan sliced{SplitDim::Batch, 2, 1, OverlapMode::Inter, true};
  const TraceFile trace = predicted_trace_read_back(truth, make_uniform_plan(model, sliced, sliced, "custom"),
                                                    model, "domino_calibrate_comm_delay.json");
  Profile start = truth;
  start.interference.comm_delay_during_compute_us = 0;
  const CalibrationResult r = calibrate_profile(start, trace, 0, parse_calibration_scope("comm_delay"));
  EXPECT_NEAR(r.profile.interference.comm_delay_during_compute_us, 800, 1e-3);
  EXPECT_EQ(r.profile.interference.comm_slowdown_during_compute, 0.3);
  EXPECT_NE(r.report.find("comm delay beside compute"), std::string::npos) << r.report;

  Profile no_slowdown = truth;
  no_slowdown.interference.comm_slowdown_during_compute = 0;
  const Profile refit =
      calibrate_profile(no_slowdown, trace, 0, parse_calibration_scope("interference")).profile;
  EXPECT_NEAR(refit.interference.comm_slowdown_during_compute, 0.3, 0.011);
  EXPECT_EQ(refit.interference.comm_delay_during_compute_us, 800);

  const BlockPlan whole{SplitDim::Batch, 1, 1, OverlapMode::None, false};
  const TraceFile serial = predicted_trace_read_back(truth, make_uniform_plan(model, whole, whole, "custom"),
                                                     model, "domino_calibrate_comm_delay_serial.json");
  const CalibrationResult none = calibrate_profile(start, serial, 0, parse_calibration_scope("comm_delay"));
  EXPECT_EQ(none.profile.interference.comm_delay_during_compute_us, 0);
  EXPECT_NE(none.report.find("not fitted"), std::string::npos) << none.report;
}

// With every timed iteration in the trace, a collective's delay is its typical one, the median over the
// iterations in which it ran mostly beside compute: one iteration in three whose collectives lost 1.5 ms more
// (a stall the iteration pays, but not the collective's median time) leaves the delay at 800 us.
TEST(ProfilerCalibrate, CommDelayIsEachCollectivesMedianOverTheIterations) {
  const ModelSpec model = default_model();
  const BlockPlan sliced{SplitDim::Batch, 2, 1, OverlapMode::Inter, true};
  const Plan plan = make_uniform_plan(model, sliced, sliced, "custom");
  const auto spans_with_delay = [&](double delay) {
    Profile p = known_profile();
    p.interference = {0.0, 0.3, delay};
    nlohmann::json rows = nlohmann::json::array();
    for (const TraceEvent& e :
         predicted_trace_read_back(p, plan, model,
                                   "domino_calibrate_delay_" + std::to_string(int(delay)) + ".json")
             .events)
      rows.push_back({e.rank, e.args.at("op"), e.start_us, e.start_us + e.dur_us});
    return rows;
  };
  Profile start = known_profile();
  start.interference = {0.0, 0.3, 0.0};
  TraceFile trace = predicted_trace_read_back(start, plan, model, "domino_calibrate_delay_shown.json");
  trace.meta["iteration_spans"] = {spans_with_delay(800), spans_with_delay(2300), spans_with_delay(800)};
  const CalibrationResult r = calibrate_profile(start, trace, 0, parse_calibration_scope("comm_delay"));
  EXPECT_NEAR(r.profile.interference.comm_delay_during_compute_us, 800, 1e-3) << r.report;
  EXPECT_NE(r.report.find("over 3 iterations"), std::string::npos) << r.report;
}

TEST(ProfilerCalibrate, RejectsATraceWithoutOps) {
  TraceFile empty;
  empty.path = "empty.json";
  EXPECT_THROW(calibrate_profile(known_profile(), empty), Error);
}

TEST(ProfilerCalibrate, RefusesToFitGemmOrInterferenceFiguresAGpuSectionReplaces) {
  Profile gpu = load_profile((std::filesystem::path(DOMINO_SOURCE_DIR) / "profiles" / "dgx-h100.yaml").string());
  ASSERT_TRUE(gpu.gpu.has_value());
  TraceFile trace;
  trace.path = "gpu.json";
  for (const char* parts : {"gemm", "interference", "all"}) {
    try {
      calibrate_profile(gpu, trace, 8, parse_calibration_scope(parts));
      FAIL() << parts;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("gpu section"), std::string::npos) << parts << ": " << e.what();
    }
  }
}

// The GEMM curve fitted is the one of the dtype the trace's ops name: a trace of fp16 ops against a profile
// of fp32 and fp16 figures fits the fp16 curve and leaves the fp32 one. A trace whose ops name no dtype, of a
// model that cannot be loaded by name, is refused rather than costed in a guessed dtype.
TEST(ProfilerCalibrate, TheOpsDtypeChoosesTheCurveAndAnUnnamedOneIsRefused) {
  Profile truth = known_profile();
  GemmProfile fp16 = *truth.gemm[int(DType::FP32)];
  fp16.peak_tflops *= 4;
  truth.gemm[int(DType::FP16)] = fp16;
  ModelSpec model = default_model();
  model.dtype = DType::FP16;
  model.name = "a-model-no-file-holds";
  const Plan plan = make_uniform_plan(model, BlockPlan{SplitDim::Batch, 1, 1, OverlapMode::None, false},
                                      BlockPlan{SplitDim::Batch, 2, 1, OverlapMode::None, false}, "custom");
  TraceFile trace = predicted_trace_read_back(truth, plan, model, "domino_calibrate_dtype.json");

  Profile wrong = truth;
  for (auto& e : wrong.gemm[int(DType::FP16)]->efficiency) e.efficiency *= 0.5;
  const Profile p = calibrate_profile(wrong, trace, 0, parse_calibration_scope("gemm")).profile;
  const auto& fitted = p.gemm[int(DType::FP16)]->efficiency;
  for (size_t i = 0; i < fitted.size(); ++i)
    EXPECT_NEAR(fitted[i].efficiency / fp16.efficiency[i].efficiency, 1.0, 0.05) << "fp16 point " << i;
  EXPECT_EQ(p.gemm[int(DType::FP32)]->efficiency.front().efficiency,
            truth.gemm[int(DType::FP32)]->efficiency.front().efficiency);

  for (TraceEvent& e : trace.events) e.args.erase("dtype");
  try {
    calibrate_profile(wrong, trace, 0, parse_calibration_scope("gemm"));
    FAIL() << "a trace without dtypes was calibrated";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("do not name their dtype"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace domino::prof
