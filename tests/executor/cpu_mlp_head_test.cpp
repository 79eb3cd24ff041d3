// cpu_mlp_head_test.cpp: the embedding backward adding to a tied head's gradient while its positional gradient starts afresh; and
// whole schedules of models with ReLU, GeGLU and tied embeddings whose parameter gradients are the finite
// differences of their loss (tests/executor/cpu_gradcheck.hpp), which fails when either use of a tied
// weight is left out of its gradient.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/executor/cpu_gradcheck.hpp"
#include "tests/executor/cpu_test_util.hpp"

namespace domino::cputest {
namespace {

// Tied head: the table's gradient already holds the head's part (accumulate), the positions' gradient is
// written afresh (accumulate_params off).
TEST(CpuMlpHead, EmbeddingBackwardAddsToTheTableButWritesThePositions) {
  Bed t;
  const int64_t V = 5, h = 3;
  const int32_t ids = t.buffer("ids", 2, 2, 1), dy = t.buffer("dy", 2, 2, h);
  const int32_t dtable = t.buffer("dtable", 1, V, h), dpos = t.buffer("dpos", 1, 2, h);
  const float tokens[4] = {1, 4, 1, 0};
  for (int i = 0; i < 4; ++i) t.raw(ids)[size_t(i)] = tokens[i];
  const Mat head_part = t.get(t.whole(dtable)), g = t.get(t.whole(dy));
  Mat want_dt = head_part, want_dp(2, h);
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t j = 0; j < h; ++j) {
      want_dt(int64_t(tokens[r]), j) += g(r, j);
      want_dp(r % 2, j) += g(r, j);
    }
  t.poison(t.whole(dpos));
  OpAttrs acc;
  acc.accumulate = true;
  t.run(t.make(OpCode::EmbeddingBwd, {t.whole(ids), t.whole(dy)}, {t.whole(dtable), t.whole(dpos)}, acc));
  t.expect_near(t.whole(dtable), want_dt, 1e-6, 1e-6, "dtable += scatter");
  t.expect_near(t.whole(dpos), want_dp, 1e-6, 1e-6, "dpos = scatter");
}

ModelSpec small_gpt() {
  ModelSpec m;
  m.name = "grad-gpt";
  m.family = Family::Gpt;
  m.layers = 2, m.hidden = 16, m.heads = 2, m.kv_heads = 2, m.ffn_hidden = 32;
  m.vocab = 24, m.seq_len = 4, m.micro_batch = 2;
  m.dtype = DType::FP32;
  m.tp = 1;
  m.source = "<test>";
  return m;
}

ModelSpec small_llama() {
  ModelSpec m = small_gpt();
  m.name = "grad-llama";
  m.family = Family::Llama, m.positions = Positions::Rotary, m.norm = NormKind::RmsNorm;
  m.activation = Activation::Swiglu;
  m.set_biases(false);
  return m;
}

Plan sliced_plan(const ModelSpec& m) {
  return make_uniform_plan(m, {SplitDim::Batch, 2, 2, OverlapMode::Inter, true},
                           {SplitDim::Sequence, 2, 2, OverlapMode::Inter, true}, "custom");
}

// ReLU's kink: a step of the default 1e-3 can move some pre-activation across 0, and a difference across
// the kink is not the derivative; 2e-4 keeps them on their side. The loss is a float (about 3, ulp 2.4e-7),
// so at this step one ulp of it is 6e-4 of the difference quotient: the absolute tolerance allows a few.
void expect_gradients_match_at(const ModelSpec& m, const Plan& plan, double eps) {
  const Schedule s = build_schedule(m, plan);
  verify_schedule(s);
  const std::vector<GradientCheck> checks = check_gradients(s, eps);
  EXPECT_GT(checks.size(), 4u);
  for (const GradientCheck& c : checks)
    EXPECT_TRUE(c.close(2e-2, 2e-3)) << c.param << ": schedule gradient . v = " << c.analytic
                           << ", finite difference = " << c.numeric;
}

TEST(CpuMlpGradients, ReluAndGegluModelsGradientsAreTheLossDerivative) {
  for (const Activation a : {Activation::Relu, Activation::Geglu}) {
    for (ModelSpec m : {small_gpt(), small_llama()}) {
      m.activation = a;
      SCOPED_TRACE(m.name + " " + to_string(a));
      for (const Plan& plan : {make_strategy_plan("megatron-sync", m), sliced_plan(m)}) {
        if (a == Activation::Relu) {
          expect_gradients_match_at(m, plan, 2e-4);
        } else {
          expect_gradients_match(m, plan);
        }
      }
    }
  }
}

TEST(CpuMlpGradients, TiedEmbeddingModelsGradientsAreTheLossDerivative) {
  for (ModelSpec m : {small_gpt(), small_llama()}) {
    m.tied_embeddings = true;
    SCOPED_TRACE(m.name);
    for (const Plan& plan : {make_strategy_plan("megatron-sync", m), sliced_plan(m)}) {
      const std::vector<GradientCheck> checks = expect_gradients_match(m, plan);
      bool has_tok = false;
      for (const GradientCheck& c : checks) {
        EXPECT_NE(c.param, "head.w");
        has_tok |= c.param == "emb.tok";
      }
      EXPECT_TRUE(has_tok);
    }
  }
}

// The tied weight's gradient check fails when either use is dropped from its gradient: the embedding's
// scatter overwriting the head's part, or the head's part never written (the scatter alone).
TEST(CpuMlpGradients, DroppingEitherUseOfTheTiedWeightFailsTheCheck) {
  ModelSpec m = small_llama();
  m.tied_embeddings = true;
  const Schedule good = build_schedule(m, make_strategy_plan("megatron-sync", m));
  const auto tok_check = [](const Schedule& s) {
    for (const GradientCheck& c : check_gradients(s))
      if (c.param == "emb.tok") return c;
    ADD_FAILURE() << "no emb.tok check";
    return GradientCheck{};
  };
  ASSERT_TRUE(tok_check(good).close());
  Schedule no_head = good;
  for (Op& op : no_head.ops)
    if (op_id(op) == "emb.bwd") op.attrs.accumulate = false;
  const GradientCheck without_head = tok_check(no_head);
  EXPECT_FALSE(without_head.close()) << without_head.analytic << " vs " << without_head.numeric;

  Schedule no_embedding = good;
  std::erase_if(no_embedding.ops, [](const Op& op) { return op_id(op) == "emb.bwd"; });
  for (size_t i = 0; i < no_embedding.ops.size(); ++i) no_embedding.ops[i].index = int32_t(i);
  const GradientCheck without_embedding = tok_check(no_embedding);
  EXPECT_FALSE(without_embedding.close())
      << without_embedding.analytic << " vs " << without_embedding.numeric;
}

}  // namespace
}  // namespace domino::cputest
