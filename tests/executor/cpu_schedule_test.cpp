// cpu_schedule_test.cpp: whole schedules from the builder, run op by op in program order on one rank
// (tp = 1, so AllReduce is the identity): every op passes verify_ops, nothing reads an unwritten
// (NaN-poisoned) element, sliced plans give the loss and parameter gradients of megatron-sync, and a few
// Adam steps lower the loss. Ties the kernels to what the schedule builder really emits.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "tests/executor/cpu_gradcheck.hpp"

namespace domino {
namespace {

ModelSpec tiny_model(bool llama) {
  ModelSpec m = default_model();
  m.name = llama ? "tiny-llama" : "tiny-gpt";
  m.layers = 2, m.hidden = 64, m.heads = 4, m.kv_heads = llama ? 2 : 4, m.ffn_hidden = llama ? 96 : 128;
  m.vocab = 96, m.seq_len = 16, m.micro_batch = 4, m.tp = 1;
  if (llama) {
    m.family = Family::Llama, m.positions = Positions::Rotary, m.activation = Activation::Swiglu, m.norm = NormKind::RmsNorm, m.set_biases(false);
  }
  validate_model(m);
  return m;
}

struct PlanCase {
  const char* name;
  BlockPlan attn, mlp;
};

class CpuSchedule : public ::testing::TestWithParam<bool> {};

TEST_P(CpuSchedule, SlicedPlansMatchMegatronSync) {
  const ModelSpec m = tiny_model(GetParam());
  const Schedule base = build_schedule(m, make_strategy_plan("megatron-sync", m));
  verify_schedule(base);
  verify_ops(base);
  RankRun ref(base);
  const float ref_loss = ref.iterate(1, false);
  ASSERT_TRUE(std::isfinite(ref_loss));
  EXPECT_NEAR(ref_loss, std::log(96.0f), 1.5f);  // near-uniform predictions at initialisation

  const std::vector<PlanCase> cases = {
      {"domino-ds", {SplitDim::Batch, 2, 1, OverlapMode::Inter, true},
       {SplitDim::Batch, 2, 1, OverlapMode::Inter, true}},
      {"seq4-col2", {SplitDim::Sequence, 4, 2, OverlapMode::Intra, false},
       {SplitDim::Sequence, 4, 2, OverlapMode::Inter, true}},
      {"batch4-col4", {SplitDim::Batch, 4, 4, OverlapMode::Intra, true},
       {SplitDim::Sequence, 2, 4, OverlapMode::None, false}},
      // DeepSpeed's order: the same ops in another program order compute the same gradients.
      {"deepspeed-order", {SplitDim::Batch, 2, 1, OverlapMode::Inter, true, SliceOrder::DeepSpeed},
       {SplitDim::Batch, 2, 1, OverlapMode::Inter, true, SliceOrder::DeepSpeed}},
      {"deepspeed-seq4-col2", {SplitDim::Sequence, 4, 2, OverlapMode::Inter, true, SliceOrder::DeepSpeed},
       {SplitDim::Sequence, 4, 1, OverlapMode::Intra, false, SliceOrder::DeepSpeed}},
  };
  for (const PlanCase& pc : cases) {
    SCOPED_TRACE(pc.name);
    const Plan plan = make_uniform_plan(m, pc.attn, pc.mlp, "custom");
    validate_plan(plan, m);
    const Schedule s = build_schedule(m, plan);
    verify_schedule(s);
    verify_ops(s);
    RankRun run(s);
    const float loss = run.iterate(1, false);
    EXPECT_NEAR(loss, ref_loss, 1e-5 * std::abs(ref_loss));
    const int compared = expect_same_gradients(ref, run, 1e-5);
    EXPECT_GT(compared, 10);
  }
}

TEST_P(CpuSchedule, AdamStepsLowerTheLoss) {
  const ModelSpec m = tiny_model(GetParam());
  const Plan plan = make_uniform_plan(m, {SplitDim::Sequence, 2, 2, OverlapMode::Inter, true},
                                      {SplitDim::Batch, 2, 1, OverlapMode::Intra, false}, "custom");
  const Schedule s = build_schedule(m, plan);
  verify_schedule(s);
  RankRun run(s);
  std::vector<float> losses;
  for (int step = 1; step <= 6; ++step) losses.push_back(run.iterate(step, true));
  ASSERT_TRUE(std::isfinite(losses.back()));
  EXPECT_LT(losses.back(), losses.front() - 0.1f) << "first " << losses.front() << ", last " << losses.back();
}

// The gradients the schedule computes are the derivatives of the loss it computes, for every parameter.
TEST_P(CpuSchedule, GradientsAreTheLossDerivative) {
  const ModelSpec m = tiny_model(GetParam());
  expect_gradients_match(m, make_strategy_plan("megatron-sync", m));
}

// The check has the resolution to fail: the largest gradient 10 % off is caught.
TEST_P(CpuSchedule, GradientCheckCatchesAWrongGradient) {
  const ModelSpec m = tiny_model(GetParam());
  const Schedule s = build_schedule(m, make_strategy_plan("megatron-sync", m));
  const std::vector<GradientCheck> checks = check_gradients(s);
  ASSERT_FALSE(checks.empty());
  GradientCheck wrong = checks.front();
  for (const GradientCheck& c : checks)
    if (std::abs(c.numeric) > std::abs(wrong.numeric)) wrong = c;
  wrong.analytic *= 1.1;
  EXPECT_FALSE(wrong.close()) << wrong.param;
}

INSTANTIATE_TEST_SUITE_P(Families, CpuSchedule, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Llama" : "Gpt"; });

}  // namespace
}  // namespace domino
