// simulator_test.cpp: the event engine on hand-built schedules whose timelines can be worked out on paper
// (serial chain, perfect overlap, interference re-timed mid-op, cross-stream deps; on GPU profiles SM waves
// and HBM sharing beside a collective), plus determinism and the bound no-comm <= every strategy on built
// schedules.
#include <gtest/gtest.h>

#include <filesystem>
#include <tuple>

#include "sim/base/error.hpp"
#include "sim/engine/simulator.hpp"
#include "tests/sim/schedule_test_util.hpp"
#include "tests/sim/toy_schedule.hpp"

namespace domino {
namespace {

// Launch 0, memory 1e6 B/us, ring busbw 1e6 B/us at tp 2 (ring factor 1): an op of D microseconds is
// D * 1e6 bytes on either stream.
Profile unit_profile(double compute_slowdown = 0, double comm_slowdown = 0) {
  Profile p = test::unit_bytes_profile();
  // The same figures for the sequence-parallel collectives (they move half the gathered buffer at tp 2).
  p.intra_node.allgather = p.intra_node.reduce_scatter = AlgorithmCurves{p.intra_node.ring()};
  p.interference = {compute_slowdown, comm_slowdown};
  return p;
}

// unit_profile with a gpu section: 132 SMs at 1e6 FLOP/us each, 128x128 tiles without fixed cost, so a
// 132-tile GEMM of k = 1024 takes one wave of kWaveUs; a collective holds 16 SMs and reads and writes one
// HBM byte per bus byte, HBM 1e6 B/us: an AllReduce or a norm of D us alone demands all of HBM.
Profile gpu_profile() {
  Profile p = unit_profile();
  p.gemm[static_cast<int>(DType::BF16)]->peak_tflops = 132;
  p.gpu = GpuProfile{132, 128, 128, 1.0, 0.0, 1.0, 128, 16, 1000, 1.0};
  return p;
}
constexpr double kWaveUs = 2.0 * 128 * 128 * 1024 / 1e6;

using Toy = test::ToySchedule;

const OpSpan& span_of(const SimResult& r, int32_t op) {
  for (const OpSpan& s : r.timeline.spans) {
    if (s.op == op) return s;
  }
  throw std::runtime_error("no span for op " + std::to_string(op));
}

TEST(Simulator, SerialChainAddsUp) {
  Toy t;
  const int32_t a = t.compute(100);
  const int32_t ar = t.comm(50, {a});
  const int32_t b = t.compute(30, {ar});
  const SimResult r = simulate(t.s, CostModel(unit_profile(0.5, 0.5)));  // never overlaps: no slowdown
  EXPECT_DOUBLE_EQ(r.iteration_us, 180);
  EXPECT_DOUBLE_EQ(r.compute_us, 130);
  EXPECT_DOUBLE_EQ(r.comm_us, 50);
  EXPECT_DOUBLE_EQ(r.exposed_comm_us, 50);
  EXPECT_DOUBLE_EQ(r.overlap_fraction, 0);
  EXPECT_DOUBLE_EQ(span_of(r, ar).start_us, 100);
  EXPECT_DOUBLE_EQ(span_of(r, b).start_us, 150);
  EXPECT_DOUBLE_EQ(span_of(r, b).end_us, 180);
  EXPECT_EQ(r.timeline.spans.size(), 3u);
  EXPECT_EQ(r.timeline.source, "predicted");
}

TEST(Simulator, PerfectOverlapHidesAllCommunication) {
  Toy t;
  const int32_t a = t.compute(100);
  const int32_t ar = t.comm(50, {a});
  t.compute(200);  // independent of the AllReduce
  const int32_t c = t.compute(10, {ar});
  const SimResult r = simulate(t.s, CostModel(unit_profile()));
  EXPECT_DOUBLE_EQ(r.iteration_us, 310);
  EXPECT_DOUBLE_EQ(r.comm_us, 50);
  EXPECT_DOUBLE_EQ(r.exposed_comm_us, 0);
  EXPECT_DOUBLE_EQ(r.overlap_fraction, 1);
  EXPECT_DOUBLE_EQ(span_of(r, ar).end_us, 150);
  EXPECT_DOUBLE_EQ(span_of(r, c).start_us, 300);
}

TEST(Simulator, PartialOverlapExposesTheTail) {
  Toy t;
  const int32_t a = t.compute(100);
  const int32_t ar = t.comm(80, {a});
  t.compute(30);
  t.compute(10, {ar});
  const SimResult r = simulate(t.s, CostModel(unit_profile()));
  // AR 100-180 behind compute 100-130: 50 us exposed; the last op runs 180-190.
  EXPECT_DOUBLE_EQ(r.iteration_us, 190);
  EXPECT_DOUBLE_EQ(r.exposed_comm_us, 50);
  EXPECT_DOUBLE_EQ(r.overlap_fraction, 1 - 50.0 / 80);
}

TEST(Simulator, OverlapEndingMidComputeOpRetimesTheRest) {
  // Compute rate 1/1.25 = 0.8, comm rate 1/2 = 0.5 while both run.
  Toy t;
  const int32_t a = t.compute(100);
  const int32_t ar = t.comm(20);
  const SimResult r = simulate(t.s, CostModel(unit_profile(0.25, 1.0)));
  // Both from 0: the AllReduce needs 20 / 0.5 = 40 us; by then A did 40 * 0.8 = 32 of its 100 us of work
  // and finishes the remaining 68 alone: 108. A flat profile's compute span is A's own 100 us, the 8 us it
  // lost a gap after it.
  EXPECT_DOUBLE_EQ(span_of(r, ar).end_us, 40);
  EXPECT_NEAR(span_of(r, a).end_us, 100, 1e-9);
  EXPECT_NEAR(r.iteration_us, 108, 1e-9);
  EXPECT_NEAR(r.compute_us, 108, 1e-9);
  EXPECT_NEAR(r.comm_us, 40, 1e-9);
  EXPECT_NEAR(r.exposed_comm_us, 0, 1e-9);
}

TEST(Simulator, OverlapEndingMidCommOpRetimesTheRest) {
  Toy t;
  const int32_t a = t.compute(10);
  const int32_t ar = t.comm(100);
  const SimResult r = simulate(t.s, CostModel(unit_profile(0.25, 1.0)));
  // A needs 10 / 0.8 = 12.5 us; the AllReduce did 12.5 * 0.5 = 6.25 and finishes 93.75 alone: 106.25.
  EXPECT_NEAR(r.compute_us, 12.5, 1e-9);
  EXPECT_NEAR(span_of(r, a).end_us, 10, 1e-9);  // its own time; the 2.5 us lost beside the AllReduce a gap
  EXPECT_NEAR(span_of(r, ar).end_us, 106.25, 1e-9);
  EXPECT_NEAR(r.exposed_comm_us, 93.75, 1e-9);
  EXPECT_NEAR(r.overlap_fraction, 1 - 93.75 / 106.25, 1e-12);
}

TEST(Simulator, InterferenceSpansSeveralOpsOnTheOtherStream) {
  // One long AllReduce behind three compute ops: the rates only change when the overlap stops (the
  // compute stream goes idle), so the AllReduce is re-timed once.
  Toy t;
  t.compute(10);
  const int32_t ar = t.comm(100);
  t.compute(10);
  const int32_t c2 = t.compute(10);
  const SimResult r = simulate(t.s, CostModel(unit_profile(0.25, 1.0)));
  // Three compute ops at 0.8: 37.5 us; the AllReduce did 18.75 meanwhile, 81.25 alone after: 118.75.
  EXPECT_NEAR(r.compute_us, 37.5, 1e-9);
  EXPECT_NEAR(span_of(r, c2).start_us, 25, 1e-9);
  EXPECT_NEAR(span_of(r, c2).end_us, 35, 1e-9);  // its own 10 us
  EXPECT_NEAR(span_of(r, ar).end_us, 118.75, 1e-9);
}

// A CPU collective's delay beside compute (flat profiles): wholly beside compute it takes T (1 + s) + delay,
// partly beside it the delay in proportion to the overlap; the compute op beside it is slowed only while the
// collective transfers. The span records the delay it paid as its wait, apart from its transfer.
TEST(Simulator, ACollectiveBesideComputeLosesItsDelayInProportionToTheOverlap) {
  Profile p = unit_profile(0, 0.5);
  p.interference.comm_delay_during_compute_us = 30;
  {
    Toy t;
    const int32_t c = t.compute(200);
    const int32_t ar = t.comm(60);
    const SimResult r = simulate(t.s, CostModel(p));
    EXPECT_NEAR(span_of(r, ar).end_us, 60 * 1.5 + 30, 1e-9);
    EXPECT_NEAR(span_of(r, ar).arrival_wait_us, 30, 1e-9);
    EXPECT_NEAR(span_of(r, c).end_us, 200, 1e-9);
    EXPECT_LT(span_of(r, c).arrival_wait_us, 0);  // a compute op has no wait
  }
  {
    Toy t;
    t.compute(40);
    const int32_t ar = t.comm(60);
    // Rate 1 / (1 + 0.5 + 30 / 60) = 0.5: 20 us of its work beside the compute op, the other 40 alone; of
    // the 40 us beside it, a quarter is the delay (at 1 / 1.5 without it the 20 us take 30).
    const SimResult r = simulate(t.s, CostModel(p));
    EXPECT_NEAR(span_of(r, ar).end_us, 80, 1e-9);
    EXPECT_NEAR(span_of(r, ar).arrival_wait_us, 10, 1e-9);
  }
  {
    Toy t;  // a collective alone pays nothing
    const int32_t ar = t.comm(60);
    const SimResult r = simulate(t.s, CostModel(p));
    EXPECT_NEAR(span_of(r, ar).end_us, 60, 1e-9);
    EXPECT_EQ(span_of(r, ar).arrival_wait_us, 0);
  }
  {
    // The compute slowdown applies for the collective's transfer, 90 of its 120 us, not for the delay: the
    // compute op runs at 1 / (1 + 0.5 x 0.75) beside it.
    p.interference.compute_slowdown_during_comm = 0.5;
    Toy t;
    const int32_t c = t.compute(200);
    const int32_t ar = t.comm(60);
    const SimResult r = simulate(t.s, CostModel(p));
    EXPECT_NEAR(span_of(r, ar).end_us, 120, 1e-9);
    EXPECT_NEAR(r.compute_us, 120 + (200 - 120 / 1.375), 1e-9);
    EXPECT_NEAR(span_of(r, c).end_us, 200, 1e-9);
  }
}

// A CPU compute op holds its stream for its own time and its stall after it; in the stall the compute thread
// lets go of the core, and a collective beside it moves at its own speed there, at the slowed rate only for
// the op's own time: (1 / (1 + 3) + 0.25) / 1.25 = 0.4 of its speed over the held time.
TEST(Simulator, ACollectiveBesideAComputeOpMovesAtItsOwnSpeedInTheStall) {
  Profile p = unit_profile(0, 3.0);
  p.interference.compute_stall_share = 0.25;
  {
    Toy t;
    t.compute(200);  // holds its stream 250 us
    const int32_t ar = t.comm(60);
    EXPECT_NEAR(span_of(simulate(t.s, CostModel(p)), ar).end_us, 60 / 0.4, 1e-9);
  }
  {
    // No stall: a quarter of its speed beside the op, 50 us of its work in 200 us, the other 10 alone after.
    p.interference.compute_stall_share = 0;
    Toy t;
    t.compute(200);
    const int32_t ar = t.comm(60);
    EXPECT_NEAR(span_of(simulate(t.s, CostModel(p)), ar).end_us, 210, 1e-9);
  }
}

// The compute stream's stall (flat profiles): each compute op holds its stream (1 + share) times its own
// time and its stall per op after that, the collectives waiting on it start after that; its span keeps its
// own time, the stall showing as a gap.
TEST(Simulator, TheComputeStallHoldsTheStreamAfterEachComputeOpNotTheCollectives) {
  // The share alone, then with a stall per op: the same time after every compute op whatever its size.
  for (const double per_op : {0.0, 6.0}) {
    Profile p = unit_profile();
    p.interference.compute_stall_share = 0.25;
    p.interference.compute_stall_per_op_us = per_op;
    Toy t;
    const int32_t a = t.compute(40);
    const int32_t ar = t.comm(60, {a});
    const int32_t b = t.compute(20);
    const int32_t c = t.compute(8, {ar});
    const SimResult r = simulate(t.s, CostModel(p));
    EXPECT_NEAR(span_of(r, a).end_us, 40, 1e-9);
    EXPECT_NEAR(span_of(r, ar).start_us, 50 + per_op, 1e-9);  // after a's stall
    EXPECT_NEAR(span_of(r, ar).end_us, 110 + per_op, 1e-9);   // the collective is not stretched
    EXPECT_NEAR(span_of(r, b).start_us, 50 + per_op, 1e-9);
    EXPECT_NEAR(span_of(r, b).end_us, 70 + per_op, 1e-9);
    EXPECT_NEAR(span_of(r, c).start_us, 110 + per_op, 1e-9);
    EXPECT_NEAR(span_of(r, c).end_us, 118 + per_op, 1e-9);
    EXPECT_NEAR(r.iteration_us, 120 + 2 * per_op, 1e-9);
    EXPECT_NEAR(r.compute_us, 85 + 3 * per_op, 1e-9);  // the stream is held for the stalls too
  }
  Profile p = unit_profile();
  p.interference.compute_stall_per_op_us = kMaxComputeStallPerOpUs + 1;
  EXPECT_THROW(validate_profile(p), Error);
}

// A communicating iteration's compute runs slower throughout (flat profiles): every compute op of a
// schedule with a collective to time is stretched, its span too, beside a collective or not; a schedule
// without one (no-comm, or communication off) keeps its ops' own times.
TEST(Simulator, ComputeOfACommunicatingScheduleRunsSlowerThroughout) {
  Profile p = unit_profile();
  p.interference.compute_slowdown_with_comm = 0.1;
  {
    Toy t;
    const int32_t a = t.compute(40);
    const int32_t ar = t.comm(60, {a});
    const int32_t b = t.compute(20, {ar});
    const SimResult r = simulate(t.s, CostModel(p));
    EXPECT_NEAR(span_of(r, a).end_us, 44, 1e-9);
    EXPECT_NEAR(span_of(r, ar).end_us, 104, 1e-9);  // the collective keeps its time
    EXPECT_NEAR(span_of(r, b).end_us, 126, 1e-9);
  }
  {
    Toy t;
    const int32_t a = t.compute(40);
    t.compute(20, {a});
    EXPECT_NEAR(simulate(t.s, CostModel(p)).iteration_us, 60, 1e-9);
  }
  {
    Toy t;
    const int32_t a = t.compute(40);
    t.comm(60, {a});
    t.s.plan.comm_enabled = false;
    EXPECT_NEAR(simulate(t.s, CostModel(p)).iteration_us, 40, 1e-9);
  }
}

TEST(Simulator, CrossStreamDepsAreHonoured) {
  Toy t;
  const int32_t a = t.compute(10);
  const int32_t ar0 = t.comm(40, {a});
  const int32_t b = t.compute(5);
  const int32_t ar1 = t.comm(10, {b});  // waits for b and, in order, for ar0
  const int32_t c = t.compute(5, {ar0});
  const int32_t d = t.compute(5, {ar1});
  const SimResult r = simulate(t.s, CostModel(unit_profile()));
  for (const Op& op : t.s.ops) {
    for (int32_t dep : op.deps) EXPECT_GE(span_of(r, op.index).start_us, span_of(r, dep).end_us) << op.index;
  }
  EXPECT_DOUBLE_EQ(span_of(r, ar1).start_us, span_of(r, ar0).end_us);  // in-order stream
  EXPECT_DOUBLE_EQ(span_of(r, c).start_us, 50);
  EXPECT_DOUBLE_EQ(span_of(r, d).start_us, 60);
  EXPECT_DOUBLE_EQ(r.iteration_us, 65);
}

TEST(Simulator, ZeroLengthOpsAndNoCommPlans) {
  Toy t;
  const int32_t a = t.compute(0);
  const int32_t ar = t.comm(50, {a});
  t.compute(20, {ar});
  EXPECT_DOUBLE_EQ(simulate(t.s, CostModel(unit_profile())).iteration_us, 70);
  t.s.plan.comm_enabled = false;  // the no-comm bound: AllReduces cost nothing, deps still order
  const SimResult r = simulate(t.s, CostModel(unit_profile()));
  EXPECT_DOUBLE_EQ(r.iteration_us, 20);
  EXPECT_DOUBLE_EQ(r.comm_us, 0);
  EXPECT_DOUBLE_EQ(r.overlap_fraction, 1);
}

TEST(Simulator, AllReduceRanksOverrideTimesAOneRankPlanAsARing) {
  Toy t;
  t.s.model.tp = 1;  // a TP 1 plan: its AllReduces sum over one rank and cost nothing
  t.s.plan.tp = 1;
  const int32_t ar = t.comm(50);
  EXPECT_DOUBLE_EQ(simulate(t.s, CostModel(unit_profile())).iteration_us, 0);
  // As `domino-exec --emulate-comm --emulate-tp 4` runs it: ring factor 2 * 3 / 4 on the same bytes.
  const SimResult r = simulate(t.s, CostModel(unit_profile()), SimOptions{true, 4});
  EXPECT_DOUBLE_EQ(span_of(r, ar).end_us, 50 * 1.5);
}

TEST(Simulator, SequenceParallelCollectivesAreCollectives) {
  for (OpKind kind : {OpKind::AllGather, OpKind::ReduceScatter}) {
    SCOPED_TRACE(to_string(kind));
    Toy t;
    const int32_t a = t.compute(100);
    const int32_t g = t.gather(kind, 50, {a});
    t.compute(20, {g});
    const SimResult r = simulate(t.s, CostModel(unit_profile(0.5, 0.5)));
    EXPECT_DOUBLE_EQ(r.iteration_us, 170);
    EXPECT_DOUBLE_EQ(r.comm_us, 50);  // on the communication stream
    t.s.plan.comm_enabled = false;    // the no-comm bound silences them as it does AllReduces
    EXPECT_DOUBLE_EQ(simulate(t.s, CostModel(unit_profile())).iteration_us, 120);
    // --emulate-tp 4: 3/4 of the gathered buffer instead of 1/2 on the same bytes.
    t.s.plan.comm_enabled = true;
    t.s.model.tp = t.s.plan.tp = 1;
    EXPECT_DOUBLE_EQ(span_of(simulate(t.s, CostModel(unit_profile()), SimOptions{true, 4}), g).end_us, 100 + 75);
  }
}

TEST(Simulator, DeadlockAndBadDepsAreReported) {
  Toy t;
  const int32_t a = t.compute(10);
  t.s.ops[a].deps = {1};  // waits on the AllReduce, which waits on a
  t.comm(10, {a});
  EXPECT_THROW(simulate(t.s, CostModel(unit_profile())), Error);
  Toy u;
  u.compute(10, {5});
  EXPECT_THROW(simulate(u.s, CostModel(unit_profile())), Error);
}

TEST(Simulator, ImpossibleDurationIsAnErrorNotAHang) {
  Toy t;
  t.compute(-5);  // negative bytes: a broken schedule
  EXPECT_THROW(simulate(t.s, CostModel(unit_profile())), Error);
  // A profile off by hundreds of orders of magnitude (memory at 1e-300 B/us) gives a time no step has: an
  // error naming the bound, not an iteration time of 300 digits.
  Toy slow;
  slow.compute(5);
  Profile p = unit_profile();
  p.memory.bandwidth_gbps = 1e-300;
  try {
    simulate(slow.s, CostModel(p));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1e12 us"), std::string::npos) << e.what();
  }
}

TEST(Simulator, FiguresDoNotDependOnRecordingTheTimeline) {
  Toy t;
  const int32_t a = t.compute(100);
  const int32_t ar = t.comm(60, {a});
  t.compute(30);
  t.compute(10, {ar});
  const CostModel cm(unit_profile(0.15, 0.05));
  const SimResult full = simulate(t.s, cm);
  const SimResult bare = simulate(t.s, cm, SimOptions{false});
  EXPECT_EQ(full.iteration_us, bare.iteration_us);
  EXPECT_EQ(full.exposed_comm_us, bare.exposed_comm_us);
  EXPECT_TRUE(bare.timeline.spans.empty());
  const SimResult again = simulate(t.s, cm);
  ASSERT_EQ(again.timeline.spans.size(), full.timeline.spans.size());
  for (size_t i = 0; i < full.timeline.spans.size(); ++i) {
    EXPECT_EQ(again.timeline.spans[i].op, full.timeline.spans[i].op);
    EXPECT_EQ(again.timeline.spans[i].start_us, full.timeline.spans[i].start_us);
    EXPECT_EQ(again.timeline.spans[i].end_us, full.timeline.spans[i].end_us);
  }
}

// GPU profiles: interference as a mechanism. A GEMM of one wave needs two beside a collective that holds
// 16 SMs, its remaining work carries over when the collective ends; memory-bound ops and the collective
// share HBM, while a GEMM that fits in the SMs left is not slowed. Flat factors would slow every pair alike.
TEST(SimulatorGpu, OneWaveGemmTakesTwiceAsLongBesideACollective) {
  Toy t;
  const int32_t g = t.gemm(12, 11);  // 132 tiles
  const int32_t ar = t.comm(100);
  const SimResult r = simulate(t.s, CostModel(gpu_profile()));
  EXPECT_NEAR(span_of(r, g).end_us, 2 * kWaveUs, 1e-9);
  EXPECT_NEAR(span_of(r, ar).end_us, 100, 1e-9);  // no factor for a collective beside a GEMM
}

TEST(SimulatorGpu, GemmThatFitsInTheSmsLeftIsNotSlowed) {
  Toy t;
  const int32_t g = t.gemm(10, 11);  // 110 tiles <= 116 SMs
  t.comm(100);
  const SimResult r = simulate(t.s, CostModel(gpu_profile()));
  EXPECT_NEAR(span_of(r, g).end_us, kWaveUs, 1e-9);
}

TEST(SimulatorGpu, RemainingWorkCarriesOverWhenTheCollectiveEnds) {
  Toy t;
  const int32_t g = t.gemm(12, 11);
  const int32_t ar = t.comm(10);
  const SimResult r = simulate(t.s, CostModel(gpu_profile()));
  // 0-10 us at half rate does 5 us of the GEMM's work; the remaining kWaveUs - 5 run on every SM.
  EXPECT_NEAR(span_of(r, ar).end_us, 10, 1e-9);
  EXPECT_NEAR(span_of(r, g).end_us, 10 + kWaveUs - 5, 1e-9);
}

TEST(SimulatorGpu, NormAndCollectiveShareHbm) {
  Toy t;
  const int32_t n = t.norm(100);
  const int32_t ar = t.comm(100);
  const SimResult r = simulate(t.s, CostModel(gpu_profile()));
  // Each alone demands all of HBM; together each gets half.
  EXPECT_NEAR(span_of(r, n).end_us, 200, 1e-9);
  EXPECT_NEAR(span_of(r, ar).end_us, 200, 1e-9);
}

// The mechanism applies to every collective kind: an AllGather or ReduceScatter holds its SMs (a one-wave
// GEMM needs two) and shares HBM with a norm (each alone demands all of it: both at half rate).
TEST(SimulatorGpu, SequenceParallelCollectivesHoldSmsAndShareHbm) {
  for (OpKind kind : {OpKind::AllGather, OpKind::ReduceScatter}) {
    SCOPED_TRACE(to_string(kind));
    Toy t;
    const int32_t g = t.gemm(12, 11);
    const int32_t c = t.gather(kind, 100);
    const SimResult r = simulate(t.s, CostModel(gpu_profile()));
    EXPECT_NEAR(span_of(r, g).end_us, 2 * kWaveUs, 1e-9);
    EXPECT_NEAR(span_of(r, c).end_us, 100, 1e-9);
    Toy u;
    const int32_t n = u.norm(100);
    const int32_t d = u.gather(kind, 100);
    const SimResult q = simulate(u.s, CostModel(gpu_profile()));
    EXPECT_NEAR(span_of(q, n).end_us, 200, 1e-9);
    EXPECT_NEAR(span_of(q, d).end_us, 200, 1e-9);
  }
}

TEST(SimulatorGpu, NormLeavingHbmHeadroomIsNotSlowed) {
  Profile p = gpu_profile();
  p.gpu->collective_hbm_bytes_per_bus_byte = 0.25;  // the collective demands a quarter of HBM
  p.memory.per_kind["norm"] = {500, 0};             // the norm half
  Toy t;
  const int32_t n = t.norm(100);  // 1e8 bytes at 5e5 B/us: 200 us
  const int32_t ar = t.comm(100);
  const SimResult r = simulate(t.s, CostModel(p));
  EXPECT_NEAR(span_of(r, n).end_us, 200, 1e-9);
  EXPECT_NEAR(span_of(r, ar).end_us, 100, 1e-9);
}

TEST(SimulatorGpu, FlatFactorsAreRefusedBesideTheMechanism) {
  Profile p = gpu_profile();
  p.interference.compute_slowdown_during_comm = 0.15;
  EXPECT_THROW(CostModel{p}, Error);
}

// On real schedules from the builder: every strategy simulates deterministically, the no-comm bound is
// never slower, and megatron-sync hides nothing.
TEST(SimulatorOnBuiltSchedules, NoCommBoundsEveryStrategy) {
  ModelSpec m = load_model("gpt3-2.7b", ModelOverrides{8, 1024, 4});
  const CostModel cm(load_profile((std::filesystem::path(DOMINO_SOURCE_DIR) / "profiles" / "dgx-h100.yaml").string()));
  const SimResult bound = simulate(test::build_verified(m, make_strategy_plan("no-comm", m)), cm, SimOptions{false});
  EXPECT_EQ(bound.comm_us, 0);
  for (const std::string& name : strategy_names()) {
    SCOPED_TRACE(name);
    const Plan plan = make_strategy_plan(name, m);
    const Schedule s = test::build_verified(m, plan);
    const SimResult r = simulate(s, cm);
    // Sequence parallelism runs the norms and adds on S/tp rows: its bound is its own schedule without comm.
    Plan own_bound = plan;
    own_bound.comm_enabled = false;
    const double bound_us = plan.sequence_parallel
                                ? simulate(test::build_verified(m, own_bound), cm).iteration_us
                                : bound.iteration_us;
    EXPECT_LE(bound_us, r.iteration_us * (1 + 1e-12));
    EXPECT_GE(r.iteration_us, r.compute_us);
    EXPECT_GT(r.peak_memory_bytes, 0);
    EXPECT_EQ(r.timeline.spans.size(), s.ops.size());
    EXPECT_EQ(simulate(s, cm, SimOptions{false}).iteration_us, r.iteration_us);
    if (name == "megatron-sync") {
      EXPECT_NEAR(r.overlap_fraction, 0, 1e-9);
    }
    if (name == "domino-ds" || name == "domino-deep") {
      EXPECT_GT(r.overlap_fraction, 0.3);
    }
  }
}


// A caller that knows the memory already (the tuner's probes of one class share their buffers) may leave it
// out: the timing stays bit for bit, only peak_memory_bytes is left 0.
TEST(SimulatorOnBuiltSchedules, LeavingMemoryOutChangesNoTiming) {
  ModelSpec m = load_model("gpt3-2.7b", ModelOverrides{8, 1024, 4});
  const CostModel cm(load_profile((std::filesystem::path(DOMINO_SOURCE_DIR) / "profiles" / "dgx-h100.yaml").string()));
  const Schedule s = test::build_verified(m, make_strategy_plan("domino-deep", m));
  SimOptions with_memory{false}, without_memory{false};
  without_memory.memory = false;
  const SimResult a = simulate(s, cm, with_memory), b = simulate(s, cm, without_memory);
  EXPECT_EQ(a.peak_memory_bytes, schedule_memory_bytes(s));
  EXPECT_GT(a.peak_memory_bytes, 0);
  EXPECT_EQ(b.peak_memory_bytes, 0);
  EXPECT_EQ(std::tie(a.iteration_us, a.compute_us, a.comm_us, a.exposed_comm_us),
            std::tie(b.iteration_us, b.compute_us, b.comm_us, b.exposed_comm_us));
}
}  // namespace
}  // namespace domino
