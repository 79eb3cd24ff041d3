// cpu_block_structure_test.cpp: the gradients of whole schedules with parallel blocks (separate and shared
// norm) and post / sandwich norms match finite differences of their own loss on the CPU backend (tp = 1),
// across slicings; and the check fails for a parallel schedule whose MLP norm backward runs too early.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/executor/cpu_gradcheck.hpp"

namespace domino {
namespace {

ModelSpec tiny(bool llama) { return tiny_cpu_model(llama, 2); }

ModelSpec parallel(bool llama, bool shared) {
  ModelSpec m = tiny(llama);
  m.residual = Residual::Parallel, m.shared_norm = shared;
  validate_model(m);
  return m;
}

ModelSpec placed(bool llama, NormPlacement placement) {
  ModelSpec m = tiny(llama);
  m.norm_placement = placement;
  m.set_biases(false);
  validate_model(m);
  return m;
}

// Uniform plans, and one whose attention and MLP slice differently (the parallel MLP norm backwards then
// wait for attention slices that cover their rows).
std::vector<Plan> plans(const ModelSpec& m) {
  std::vector<Plan> out;
  for (const char* name : {"megatron-sync", "domino-deep", "slices:2:sequence"})
    out.push_back(make_strategy_plan(name, m));
  const BlockPlan attn{SplitDim::Batch, 2, 1, OverlapMode::Inter, true};
  const BlockPlan mlp{SplitDim::Sequence, 4, 1, OverlapMode::Inter, true};
  out.push_back(make_uniform_plan(m, attn, mlp, "custom"));
  return out;
}

TEST(CpuBlockStructure, ParallelBlocksGradientsMatch) {
  for (const bool llama : {false, true}) {
    for (const bool shared : {false, true}) {
      const ModelSpec m = parallel(llama, shared);
      for (const Plan& plan : plans(m)) {
        SCOPED_TRACE(m.name + (shared ? " shared " : " separate ") + plan.strategy);
        expect_gradients_match(m, plan);
      }
    }
  }
}

TEST(CpuBlockStructure, PostAndSandwichNormGradientsMatch) {
  for (const bool llama : {false, true}) {
    for (const NormPlacement placement : {NormPlacement::Post, NormPlacement::Sandwich}) {
      const ModelSpec m = placed(llama, placement);
      std::vector<Plan> all = plans(m);
      const BlockPlan ds{SplitDim::Batch, 2, 1, OverlapMode::Inter, true, SliceOrder::DeepSpeed};
      all.push_back(make_uniform_plan(m, ds, ds, "deepspeed-order"));
      for (const Plan& plan : all) {
        SCOPED_TRACE(m.name + " " + to_string(placement) + " " + plan.strategy);
        const std::vector<GradientCheck> checks = expect_gradients_match(m, plan);
        const auto post = std::count_if(checks.begin(), checks.end(), [](const GradientCheck& c) {
          return c.param.find("post.norm") != std::string::npos;
        });
        EXPECT_EQ(post, int64_t(m.layers) * 2 * (llama ? 1 : 2));  // gamma (and beta) of both blocks
      }
    }
  }
}

// The gradient check sees the dependency parallel blocks must keep: run the MLP's norm backwards right
// after the MLP's own backward (where a sequential block has them), so that the attention reads d(x_out)
// with the MLP's input gradient already added, and some gradient no longer matches.
TEST(CpuBlockStructure, EarlyMlpNormBackwardBreaksTheGradients) {
  const ModelSpec m = parallel(false, false);
  Schedule s = build_schedule(m, make_strategy_plan("megatron-sync", m));
  const auto is_mlp_norm_bwd = [](const Op& op) {
    return op.phase == Phase::Backward && op.block == Block::Mlp && std::string(op.name) == "norm.bwd";
  };
  const auto first_attn_bwd = [](const Op& op) {
    return op.phase == Phase::Backward && op.block == Block::Attn;
  };
  for (auto norm = std::find_if(s.ops.begin(), s.ops.end(), is_mlp_norm_bwd); norm != s.ops.end();
       norm = std::find_if(norm + 1, s.ops.end(), is_mlp_norm_bwd)) {
    // Move it back to just before the layer's first attention backward op.
    const auto attn = std::find_if(
        s.ops.begin(), norm, [&](const Op& op) { return first_attn_bwd(op) && op.layer == norm->layer; });
    ASSERT_NE(attn, norm) << op_id(*norm) << " already precedes the attention's backward";
    std::rotate(attn, norm, norm + 1);
  }
  const std::vector<GradientCheck> checks = check_gradients(s);
  const auto wrong =
      std::count_if(checks.begin(), checks.end(), [](const GradientCheck& c) { return !c.close(); });
  EXPECT_GT(wrong, 0) << "the gradient check cannot tell the parallel block's dependency";
}

}  // namespace
}  // namespace domino
