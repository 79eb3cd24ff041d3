// cpu_attention_features_test.cpp: the attention features run on the CPU backend as the builder emits
// them: whole schedules at tp = 1 whose parameter gradients match finite differences of their own loss
// (decoupled head_dim, a QKV bias alone, QK-norm per head and full, sliding window unsliced and over
// sequence slices, partial rotary), the window's mask convention (keys (i - w, i]), and the partial
// rope kernel against a reference (leading rotary_dims rotated rotate-half, the rest passed through).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tests/executor/cpu_gradcheck.hpp"
#include "tests/executor/cpu_test_util.hpp"

namespace domino {
namespace {

ModelSpec small_llama() {
  ModelSpec m = default_model();
  m.name = "attn-features";
  m.family = Family::Llama, m.positions = Positions::Rotary, m.activation = Activation::Swiglu;
  m.norm = NormKind::RmsNorm, m.set_biases(false);
  m.layers = 2, m.hidden = 32, m.heads = 4, m.kv_heads = 2, m.ffn_hidden = 48;
  m.vocab = 40, m.seq_len = 12, m.micro_batch = 2, m.tp = 1;
  return m;
}

Plan plain_plan(const ModelSpec& m) { return make_strategy_plan("megatron-sync", m); }

// Attention split into p sequence slices.
Plan seq_plan(const ModelSpec& m, int p) {
  BlockPlan attn;
  attn.dim = SplitDim::Sequence, attn.p = p;
  return make_uniform_plan(m, attn, BlockPlan{}, "custom");
}

// The check of the parameter buffer `name`.
const GradientCheck& check_of(const std::vector<GradientCheck>& checks, const std::string& name) {
  for (const GradientCheck& c : checks)
    if (c.param == name) return c;
  throw std::runtime_error("no gradient check of " + name);
}

float loss_of(const ModelSpec& m, const Plan& plan) {
  const Schedule s = build_schedule(m, plan);
  RankRun run(s);
  return run.iterate(1, false);
}

TEST(CpuAttentionFeatures, DecoupledHeadDimGradientsMatch) {
  ModelSpec m = small_llama();
  m.head_size = 12;  // attention width 48 on hidden 32
  expect_gradients_match(m, plain_plan(m));
  expect_gradients_match(m, seq_plan(m, 2));
}

TEST(CpuAttentionFeatures, QkvBiasAloneGradientsMatch) {
  ModelSpec m = small_llama();  // Qwen2: a QKV bias, no other bias
  m.qkv_bias = true;
  const std::vector<GradientCheck> checks = expect_gradients_match(m, plain_plan(m));
  EXPECT_NE(check_of(checks, "L0.attn.qkv.b").numeric, 0.0);
  EXPECT_THROW(check_of(checks, "L0.attn.proj.b"), std::runtime_error);
}

TEST(CpuAttentionFeatures, QkNormGradientsMatch) {
  for (QkNorm kind : {QkNorm::PerHead, QkNorm::Full}) {
    ModelSpec m = small_llama();
    m.qk_norm = kind;
    for (const Plan& plan : {plain_plan(m), seq_plan(m, 2)}) {
      const std::vector<GradientCheck> checks = expect_gradients_match(m, plan);
      // The loss depends on the gains (they take part in the forward): some gain's directional derivative
      // is clearly nonzero (one random direction may be nearly orthogonal to a gradient).
      double largest = 0;
      for (const char* g : {"L0.attn.qnorm.g", "L0.attn.knorm.g", "L1.attn.qnorm.g", "L1.attn.knorm.g"})
        largest = std::max(largest, std::abs(check_of(checks, g).numeric));
      EXPECT_GT(largest, 1e-3) << to_string(kind);
    }
    EXPECT_GT(std::abs(loss_of(m, plain_plan(m)) - loss_of(small_llama(), plain_plan(m))), 1e-5) << to_string(kind);
  }
}

TEST(CpuAttentionFeatures, SlidingWindowGradientsMatchOverSlices) {
  ModelSpec m = small_llama();
  m.sliding_window = 3;
  const float whole = loss_of(m, plain_plan(m));
  EXPECT_GT(std::abs(whole - loss_of(small_llama(), plain_plan(m))), 1e-5) << "the window masks nothing";
  expect_gradients_match(m, plain_plan(m));
  for (int p : {2, 4}) {
    expect_gradients_match(m, seq_plan(m, p));
    EXPECT_NEAR(loss_of(m, seq_plan(m, p)), whole, 1e-5) << p << " sequence slices";
  }
  m.window_layers = WindowLayers::Even;
  expect_gradients_match(m, seq_plan(m, 4));
}

TEST(CpuAttentionFeatures, SlidingWindowQuerySeesItsLastWindowKeys) {
  ModelSpec m = small_llama();
  m.sliding_window = 3;
  const Schedule s = build_schedule(m, seq_plan(m, 2));
  RankRun run(s);
  run.iterate(1, false);
  const std::vector<float>& probs = run.buffer("L0.attn.probs");
  const int64_t S = m.seq_len, H = m.heads, w = m.sliding_window;
  for (int64_t b = 0; b < m.micro_batch; ++b)
    for (int64_t i = 0; i < S; ++i)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t k = 0; k < S; ++k) {
          const float p = probs[size_t(((b * S + i) * H + h) * S + k)];
          const bool visible = k <= i && k > i - w;
          EXPECT_EQ(p > 0.0f, visible) << "query " << i << " key " << k << " head " << h;
        }
}

TEST(CpuAttentionFeatures, PartialRotaryGradientsMatch) {
  ModelSpec m = small_llama();
  m.rotary_dims = m.head_dim() / 2;
  expect_gradients_match(m, plain_plan(m));
  EXPECT_GT(std::abs(loss_of(m, plain_plan(m)) - loss_of(small_llama(), plain_plan(m))), 1e-6);
}

TEST(CpuAttentionFeatures, PartialRopeRotatesLeadingDimsOnly) {
  using namespace cputest;
  Bed t;
  const int64_t d = 8, r = 4, heads = 2;
  const int32_t x = t.buffer("x", 2, 5, heads * d);
  const Region rows = box(x, 0, 2, 1, 4, 0, heads * d);
  const Mat x0 = t.get(rows);
  OpAttrs a;
  a.heads = int16_t(heads), a.head_dim = int16_t(d), a.rotary_dims = int16_t(r);
  t.run(t.make(OpCode::RopeFwd, {rows}, {rows}, a));
  const Mat y = t.get(rows);
  for (int64_t row = 0; row < x0.rows; ++row) {
    const double pos = double(1 + row % 3);
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < r / 2; ++i) {
        const double th = pos * std::pow(10000.0, -2.0 * double(i) / double(r));
        const double x1 = x0(row, h * d + i), x2 = x0(row, h * d + i + r / 2);
        EXPECT_NEAR(y(row, h * d + i), x1 * std::cos(th) - x2 * std::sin(th), 1e-5);
        EXPECT_NEAR(y(row, h * d + i + r / 2), x1 * std::sin(th) + x2 * std::cos(th), 1e-5);
      }
      for (int64_t c = r; c < d; ++c) EXPECT_EQ(y(row, h * d + c), x0(row, h * d + c));
    }
  }
}

}  // namespace
}  // namespace domino
