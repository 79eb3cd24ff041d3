// cpu_recompute_test.cpp: activation recomputation (Plan::recompute) changes what a rank keeps and runs,
// never what it computes: on the CPU backend (tp = 1) the whole schedule with selective or full
// recomputation gives the loss and parameter gradients of the same plan without it, on sliced plans (batch
// and sequence slices, column chunks, both slice orders), GPT and Llama shapes and the structural features the
// mechanism covers.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/executor/cpu_gradcheck.hpp"

namespace domino {
namespace {

ModelSpec tiny(bool llama) {
  ModelSpec m = tiny_cpu_model(llama, 3);  // three layers: two shared buffer sets and one layer beyond them
  validate_model(m);
  return m;
}

std::vector<Plan> sliced_plans(const ModelSpec& m) {
  using S = SplitDim;
  using O = OverlapMode;
  const SliceOrder DS = SliceOrder::DeepSpeed;
  std::vector<Plan> out = {make_strategy_plan("megatron-sync", m)};
  out.push_back(make_uniform_plan(m, {S::Batch, 2, 2, O::Inter, true}, {S::Batch, 4, 1, O::Intra, false}, "b2x2"));
  out.push_back(make_uniform_plan(m, {S::Sequence, 4, 2, O::Inter, true}, {S::Sequence, 2, 2, O::None, true}, "s4x2"));
  out.push_back(make_uniform_plan(m, {S::Sequence, 2, 1, O::Inter, true, DS}, {S::Batch, 2, 2, O::Inter, true, DS}, "ds"));
  return out;
}

// The plan with and without recomputation, run one iteration each from identical buffers: the same loss and
// the same gradients. The recomputed ops redo the same arithmetic, but the two schedules allocate different
// buffer sets, and the vectorised float32 reductions (norm gains summed over rows) peel by alignment, so the
// sums may differ in their last bits (seen: 1.3e-6 of the largest element on a QK-norm gain): 5e-5 of the
// largest element, far below what stale activations from another layer give.
void expect_same_as_without(const ModelSpec& m, const Plan& plan, Recompute mode) {
  SCOPED_TRACE(m.name + " " + plan.strategy + " recompute " + to_string(mode));
  Plan with = plan;
  with.recompute = mode;
  validate_plan(with, m);
  const Schedule ref = build_schedule(m, plan), s = build_schedule(m, with);
  verify_schedule(s);
  verify_ops(s);
  int recomputed = 0;
  for (const Op& op : s.ops) recomputed += op.phase == Phase::Recompute;
  EXPECT_GT(recomputed, 0);
  RankRun a(ref), b(s);
  const float want = a.iterate(1, false), got = b.iterate(1, false);
  ASSERT_TRUE(std::isfinite(got));
  EXPECT_NEAR(got, want, 1e-6 * std::abs(want));
  const int compared = expect_same_gradients(a, b, 5e-5);
  EXPECT_GT(compared, 10);
}

TEST(CpuRecompute, GradientsEqualWithoutRecompute) {
  for (const bool llama : {false, true}) {
    const ModelSpec m = tiny(llama);
    for (const Plan& plan : sliced_plans(m))
      for (const Recompute mode : {Recompute::Selective, Recompute::Full}) expect_same_as_without(m, plan, mode);
  }
}

// Parallel blocks (shared norm), QK-norm with a sliding window, tied embeddings: both modes; post norms:
// selective only (full is refused for them).
TEST(CpuRecompute, FeaturesGradientsEqualWithoutRecompute) {
  ModelSpec par = tiny(false);
  par.residual = Residual::Parallel, par.shared_norm = true;
  ModelSpec qk = tiny(true);
  qk.qk_norm = QkNorm::PerHead, qk.sliding_window = 3;
  ModelSpec tied = tiny(false);
  tied.tied_embeddings = true;
  for (ModelSpec* m : {&par, &qk, &tied}) {
    validate_model(*m);
    for (const Plan& plan : sliced_plans(*m)) {
      if (m == &par && plan.layers[0].attn.order == SliceOrder::DeepSpeed) continue;  // refused for parallel
      for (const Recompute mode : {Recompute::Selective, Recompute::Full}) expect_same_as_without(*m, plan, mode);
    }
  }
  ModelSpec post = tiny(true);
  post.norm_placement = NormPlacement::Sandwich;
  validate_model(post);
  expect_same_as_without(post, make_strategy_plan("slices:2:sequence", post), Recompute::Selective);
}

}  // namespace
}  // namespace domino
