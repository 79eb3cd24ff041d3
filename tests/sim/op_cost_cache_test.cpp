// op_cost_cache_test.cpp: op costs kept across schedules (sim/engine/op_cost_cache.hpp) equal the cost
// model's own, bit for bit, on built schedules of several plans; and two ops that differ in any one field
// the cost model reads get costs of their own (a key missing a field would hand one op the other's cost).
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>

#include "sim/engine/op_cost_cache.hpp"
#include "sim/model/model_spec.hpp"
#include "tests/sim/schedule_test_util.hpp"
#include "tests/sim/toy_schedule.hpp"

namespace domino {
namespace {

// Every figure a simulation reads of the op costs: durations, the skew rate and the rates of every compute
// op beside every communication op.
void expect_same_costs(const Schedule& s, const OpCosts& cached, const OpCosts& fresh) {
  ASSERT_EQ(cached.duration.size(), fresh.duration.size());
  for (size_t i = 0; i < fresh.duration.size(); ++i) EXPECT_EQ(cached.duration[i], fresh.duration[i]) << op_id(s.ops[i]);
  EXPECT_EQ(cached.sync_per_compute, fresh.sync_per_compute);
  EXPECT_EQ(cached.flat_interference.compute_stall_share, fresh.flat_interference.compute_stall_share);
  EXPECT_EQ(cached.compute_loss_between_ops, fresh.compute_loss_between_ops);
  for (const Op& c : s.ops) {
    if (c.stream != Stream::Compute) continue;
    for (const Op& m : s.ops) {
      if (m.stream != Stream::Comm) continue;
      const Rates a = cached.interference.rates(c.index, m.index), b = fresh.interference.rates(c.index, m.index);
      EXPECT_EQ(a[0], b[0]) << op_id(c) << " beside " << op_id(m);
      EXPECT_EQ(a[1], b[1]) << op_id(c) << " beside " << op_id(m);
    }
  }
}

TEST(OpCostCache, EqualsTheCostModelOnBuiltSchedulesOfSeveralPlans) {
  const ModelSpec m = load_model("gpt3-2.7b", ModelOverrides{8, 1024, 4});
  const CostModel cm(load_profile((std::filesystem::path(DOMINO_SOURCE_DIR) / "profiles" / "dgx-h100.yaml").string()));
  OpCostCache cache(cm, m.tp);
  size_t distinct_after_first = 0;
  for (const char* name : {"megatron-sync", "domino-deep", "domino-ds", "megatron-async", "domino-deep"}) {
    SCOPED_TRACE(name);
    const Plan plan = make_strategy_plan(name, m);
    if (plan.sequence_parallel) continue;
    const Schedule s = test::build_verified(m, plan);
    const OpCosts cached = cache.op_costs(s, SimOptions{false});
    expect_same_costs(s, cached, op_costs(s, cm, SimOptions{false}));
    EXPECT_EQ(simulate(s, cached, SimOptions{false}).iteration_us, simulate(s, cm, SimOptions{false}).iteration_us);
    if (distinct_after_first == 0) distinct_after_first = cache.distinct_ops();
  }
  // The schedules share ops: fewer distinct ones than ops, and the later plans add few.
  EXPECT_GT(distinct_after_first, 0u);
  EXPECT_LT(cache.distinct_ops(), 3 * distinct_after_first);
}

// A flat CPU profile with the terms it alone carries, a collective's delay beside compute and the compute
// stream's stall: the tuner's cached costs take both as the simulator's do.
TEST(OpCostCache, EqualsTheCostModelWithACpuProfilesDelayStallAndAttentionPerCode) {
  const ModelSpec m = default_model();
  Profile p = load_profile((std::filesystem::path(DOMINO_SOURCE_DIR) / "profiles" / "cpu-dev.yaml").string());
  p.interference.comm_delay_during_compute_us = 800;
  p.interference.compute_stall_share = 0.1;
  p.interference.compute_slowdown_with_comm = 0.05;
  p.interference.comm_start_wait_us = 1500;  // the event loop's hold reaches the cached costs too
  p.interference.comm_start_wait_decay_us = 4000;
  p.interference.comm_resume_wait_us = 600;
  p.attention.per_code["AttnBwd"] = {20, 80, 15};  // AttnFwd keeps the curve
  const CostModel cm(p);
  OpCostCache cache(cm, m.tp);
  for (const char* name : {"megatron-sync", "domino-deep"}) {
    SCOPED_TRACE(name);
    const Schedule s = test::build_verified(m, make_strategy_plan(name, m));
    const OpCosts cached = cache.op_costs(s, SimOptions{false});
    EXPECT_EQ(cached.flat_interference.compute_stall_share, 0.1);
    expect_same_costs(s, cached, op_costs(s, cm, SimOptions{false}));
    EXPECT_EQ(simulate(s, cached, SimOptions{false}).iteration_us,
              simulate(s, cm, SimOptions{false}).iteration_us);
  }
}

// The tuner's probes under sequence parallelism are built one by one and costed through the same cache:
// their AllGathers and ReduceScatters, and the ops whose shapes the sequence shard changes, beside the
// AllReduce plans' ops already cached.
TEST(OpCostCache, EqualsTheCostModelOnSequenceParallelSchedules) {
  const ModelSpec m = load_model("llama2-7b", ModelOverrides{8, 1024, 2});
  const CostModel cm(load_profile((std::filesystem::path(DOMINO_SOURCE_DIR) / "profiles" / "dgx-h100.yaml").string()));
  OpCostCache cache(cm, m.tp);
  for (const char* name : {"megatron-async", "megatron-sp", "megatron-sp-overlap", "megatron-sp"}) {
    SCOPED_TRACE(name);
    const Schedule s = test::build_verified(m, make_strategy_plan(name, m));
    const OpCosts cached = cache.op_costs(s, SimOptions{false});
    expect_same_costs(s, cached, op_costs(s, cm, SimOptions{false}));
    EXPECT_EQ(simulate(s, cached, SimOptions{false}).iteration_us, simulate(s, cm, SimOptions{false}).iteration_us);
  }
}

TEST(OpCostCache, SchedulesOutsideItsRanksOrWithoutCommunicationAreCostedAsTheyAre) {
  const ModelSpec m = load_model("gpt3-2.7b", ModelOverrides{8, 1024, 4});
  const CostModel cm(load_profile((std::filesystem::path(DOMINO_SOURCE_DIR) / "profiles" / "dgx-h100.yaml").string()));
  OpCostCache cache(cm, m.tp);
  Plan silent = make_strategy_plan("domino-deep", m);
  silent.comm_enabled = false;
  const Schedule s = test::build_verified(m, silent);
  expect_same_costs(s, cache.op_costs(s, SimOptions{false}), op_costs(s, cm, SimOptions{false}));
  const Schedule t = test::build_verified(m, make_strategy_plan("domino-deep", m));
  SimOptions emulated{false, 4};
  expect_same_costs(t, cache.op_costs(t, emulated), op_costs(t, cm, emulated));
  EXPECT_EQ(cache.distinct_ops(), 0u);
}

// A profile under which each field the cost model reads changes a cost: the tile model (transposed operands
// at half rate), fp32 at half the bf16 peak, attention tiles of 128 query rows, norms at their own bandwidth,
// residual adds paying per row of a column chunk and a later chunk at its own bandwidth, a collective holding
// 16 of 132 SMs.
Profile field_profile() {
  Profile p = test::unit_bytes_profile();
  p.gemm[static_cast<int>(DType::BF16)]->peak_tflops = 132;
  GemmProfile fp32 = *p.gemm[static_cast<int>(DType::BF16)];
  fp32.peak_tflops = 66;
  p.gemm[static_cast<int>(DType::FP32)] = fp32;
  p.memory.per_kind["norm"] = {500, 0};
  p.memory.per_code["ResidualAdd"] = {400, 0, 0.05, 1000, 800};
  p.memory.cache_bytes = 1e6;
  p.gpu = GpuProfile{132, 128, 128, 1.0, 0.0, 0.5, 128, 16, 1000, 1.0};
  return p;
}

// A GEMM of 12 x 11 tiles (one wave on 132 SMs, two beside the collective).
void gemm(Op& op) {
  op.kind = OpKind::Gemm;
  op.code = OpCode::MatMul;
  op.m = 12 * 128, op.n = 11 * 128, op.k = 1024;
  op.flops = 2.0 * double(op.m) * double(op.n) * double(op.k);
  op.bytes = 0;
}
// Attention over 2 batch entries of 192 query rows, 32 heads: 2 x 2 x 32 = 128 CTAs.
void attention(Op& op) {
  gemm(op);
  op.kind = OpKind::Attention;
  op.code = OpCode::AttnFwd;
  op.m = 384;
  op.attrs.heads = 32;
  op.n_in = 1;
  op.in[0] = Region{0, 0, 2, 0, 192, 0, 64};
}
void norm(Op& op) {
  op.kind = OpKind::Norm;
  op.code = OpCode::LayerNormFwd;
  op.bytes = 1e8;
}
// A residual add of 1024 rows, whole (chunk -1).
void residual_add(Op& op) {
  op.kind = OpKind::Elementwise;
  op.code = OpCode::ResidualAdd;
  op.m = 1024;
  op.bytes = 1e7;
}

struct FieldCase {
  const char* field;
  std::function<void(Op&)> base, change;
};

TEST(OpCostCache, OpsDifferingInAnyFieldTheCostModelReadsGetTheirOwnCosts) {
  const std::vector<FieldCase> cases = {
      {"kind", gemm, [](Op& op) { op.kind = OpKind::Attention; }},
      {"code", gemm, [](Op& op) { op.code = OpCode::MatMulDgrad; }},
      {"dtype", gemm, [](Op& op) { op.dtype = DType::FP32; }},
      {"m", gemm, [](Op& op) { op.m *= 2; }},
      {"n", gemm, [](Op& op) { op.n *= 2; }},
      {"k", gemm, [](Op& op) { op.k *= 2; }},
      {"row blocks", gemm,
       [](Op& op) {
         op.attrs.row_blocks = 8;  // 8 x 2 x 11 tiles: two waves where the whole rows take one
         op.n_in = 1;
         op.in[0] = Region{0, 0, 8, 0, 192, 0, 1024};
       }},
      {"bytes", gemm, [](Op& op) { op.bytes = 1e12; }},
      {"flops", attention, [](Op& op) { op.flops *= 2; }},
      {"heads", attention, [](Op& op) { op.attrs.heads = 16; }},
      {"query batch and sequence, same rows", attention, [](Op& op) { op.in[0].b1 = 1, op.in[0].s1 = 384; }},
      {"query batch", attention, [](Op& op) { op.in[0].b1 = 1; }},
      {"query sequence", attention, [](Op& op) { op.in[0].s1 = 96; }},
      {"norm bytes", norm, [](Op& op) { op.bytes *= 2; }},
      {"memory kind", norm, [](Op& op) { op.kind = OpKind::Elementwise; }},
      {"first column chunk", residual_add, [](Op& op) { op.chunk = 0; }},
      {"a later column chunk", [](Op& op) { residual_add(op), op.chunk = 0; }, [](Op& op) { op.chunk = 1; }},
      {"the first column chunk's chunk count",
       [](Op& op) { residual_add(op), op.chunk = 0, op.attrs.chunks = 2; },
       [](Op& op) { op.attrs.chunks = 4; }},
      {"a later column chunk against whole rows", residual_add, [](Op& op) { op.chunk = 1; }},
      {"a column chunk's rows", [](Op& op) { residual_add(op), op.chunk = 0; }, [](Op& op) { op.m = 512; }},
      {"fresh bytes", residual_add, [](Op& op) { op.fresh_bytes = 5e6, op.fresh_from_bytes = 5e5; }},
      {"the fresh bytes' source",
       [](Op& op) { residual_add(op), op.fresh_bytes = 5e6, op.fresh_from_bytes = 5e5; },
       [](Op& op) { op.fresh_from_bytes = 5e6; }},
  };
  const CostModel cm(field_profile());
  OpCostCache cache(cm, 2);
  for (const FieldCase& c : cases) {
    SCOPED_TRACE(c.field);
    test::ToySchedule t;
    const int32_t a = t.compute(0), b = t.compute(0), ar = t.comm(100);
    c.base(t.s.ops[size_t(a)]);
    c.base(t.s.ops[size_t(b)]);
    c.change(t.s.ops[size_t(b)]);
    const OpCosts cached = cache.op_costs(t.s, SimOptions{false});
    expect_same_costs(t.s, cached, op_costs(t.s, cm, SimOptions{false}));
    const bool own_duration = cached.duration[size_t(a)] != cached.duration[size_t(b)];
    const bool own_rate = cached.interference.rates(a, ar)[0] != cached.interference.rates(b, ar)[0];
    EXPECT_TRUE(own_duration || own_rate) << "the two ops cost alike: the case does not test the field";
  }
  // The AllReduce's bytes: each size its own duration.
  test::ToySchedule t;
  t.comm(100), t.comm(200);
  const OpCosts cached = cache.op_costs(t.s, SimOptions{false});
  expect_same_costs(t.s, cached, op_costs(t.s, cm, SimOptions{false}));
  EXPECT_NE(cached.duration[0], cached.duration[1]);
}

}  // namespace
}  // namespace domino
