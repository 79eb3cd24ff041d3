// schedule_attention_features_test.cpp: the attention features of the structural model fields in the
// schedule IR: a decoupled head_dim sizes QKV, proj and attention by heads x head_dim (not hidden); a
// sliding window shrinks the attention's FLOPs and key regions (and a window as long as the sequence
// changes nothing); QK-norm adds grouped norm ops with their gains between QKV and rope; partial rotary
// rotates (and is charged for) fewer columns. Every expectation is computed from the definitions.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "sim/base/error.hpp"
#include "tests/sim/schedule_test_util.hpp"

namespace domino {
namespace {

using test::build_verified;

const Op& op_named(const Schedule& s, const std::string& id) {
  for (const Op& op : s.ops)
    if (op_id(op) == id) return op;
  throw std::runtime_error("no op " + id);
}

bool has_op(const Schedule& s, const std::string& id) {
  return std::any_of(s.ops.begin(), s.ops.end(), [&](const Op& op) { return op_id(op) == id; });
}

const BufferDesc& buffer_named(const Schedule& s, const std::string& name) {
  for (const BufferDesc& b : s.buffers)
    if (b.name == name) return b;
  throw std::runtime_error("no buffer " + name);
}

// Sequence-split attention (p slices), plain MLP.
Plan seq_plan(const ModelSpec& m, int p) {
  BlockPlan attn;
  attn.dim = SplitDim::Sequence, attn.p = p;
  return make_uniform_plan(m, attn, BlockPlan{}, "custom");
}

// Gemma-like: 4 heads of 16 (attention width 64) on hidden 48.
ModelSpec decoupled_model() {
  ModelSpec m = test::tiny_llama(2);
  m.hidden = 48, m.head_size = 16;
  return m;
}

TEST(AttentionFeatures, DecoupledHeadDimSizesQkvProjAndAttention) {
  const ModelSpec m = decoupled_model();
  ASSERT_NE(m.head_dim() * m.heads, m.hidden);
  const Schedule s = build_verified(m, make_strategy_plan("megatron-sync", m));
  const int64_t a_l = m.heads / m.tp, kv_l = m.kv_heads / m.tp, d = m.head_size;
  const Op& qkv = op_named(s, "L0.fwd.attn.qkv.s0");
  EXPECT_EQ(qkv.k, m.hidden);
  EXPECT_EQ(qkv.n, (a_l + 2 * kv_l) * d);
  const Op& proj = op_named(s, "L0.fwd.attn.proj.s0");
  EXPECT_EQ(proj.k, a_l * d);
  EXPECT_EQ(proj.n, m.hidden);
  EXPECT_EQ(op_named(s, "L0.bwd.attn.proj.dgrad.s0").n, a_l * d);
  const Op& core = op_named(s, "L0.fwd.attn.core.s0");
  const double pairs = double(m.micro_batch) * m.seq_len * (m.seq_len + 1) / 2.0;
  EXPECT_DOUBLE_EQ(core.flops, 4.0 * pairs * double(d) * double(a_l));
  EXPECT_EQ(buffer_named(s, "L0.attn.ctx").cols, a_l * d);
  const BufferDesc& proj_w = buffer_named(s, "L0.attn.proj.w");
  EXPECT_EQ(proj_w.seq, a_l * d);
  const std::array<int64_t, 2> full = full_shape(m, proj_w);
  EXPECT_EQ(full[0], int64_t(m.heads) * d);
  EXPECT_EQ(full[1], m.hidden);
  // Rank 1's proj rows follow rank 0's a_l * head_dim rows of the full tensor.
  EXPECT_EQ(shard_of(m, proj_w, 1, 0, 0).row, a_l * d);
}

ModelSpec windowed_model(int window) {
  ModelSpec m = test::tiny_llama(2);
  m.seq_len = 16, m.sliding_window = window;
  return m;
}

// Query positions [s0, s1) each see min(q + 1, window) keys.
double windowed_pairs(const ModelSpec& m, int64_t s0, int64_t s1, int64_t window) {
  double pairs = 0;
  for (int64_t q = s0; q < s1; ++q) pairs += double(std::min(q + 1, window));
  return pairs * m.micro_batch;
}

TEST(AttentionFeatures, SlidingWindowShrinksFlopsAndKeyRegions) {
  const int w = 5;
  const ModelSpec m = windowed_model(w);
  const Schedule s = build_verified(m, seq_plan(m, 2));
  const int64_t a_l = m.heads / m.tp, d = m.head_dim(), half = m.seq_len / 2;
  const Op& first = op_named(s, "L0.fwd.attn.core.s0");
  const Op& second = op_named(s, "L0.fwd.attn.core.s1");
  EXPECT_EQ(second.attrs.window, w);
  EXPECT_DOUBLE_EQ(first.flops, 4.0 * windowed_pairs(m, 0, half, w) * double(d) * double(a_l));
  EXPECT_DOUBLE_EQ(second.flops, 4.0 * windowed_pairs(m, half, m.seq_len, w) * double(d) * double(a_l));
  // The second slice's keys start at its first query's position - window + 1, not at 0.
  EXPECT_EQ(second.in[1].s0, half - w + 1);
  EXPECT_EQ(second.in[2].s0, half - w + 1);
  EXPECT_EQ(first.in[1].s0, 0);
  // Backward: slice 1 (processed first) writes its keys; slice 0 writes the keys below slice 1's first key
  // and adds to the rest.
  const Op& bwd0 = op_named(s, "L0.bwd.attn.core.bwd.s0");
  EXPECT_TRUE(bwd0.attrs.accumulate);
  EXPECT_EQ(bwd0.attrs.overwrite_end, half - w + 1);
  EXPECT_EQ(op_named(s, "L0.bwd.attn.core.bwd.s1").out[1].s0, half - w + 1);
}

TEST(AttentionFeatures, WindowLayersChooseWhichLayersAreWindowed) {
  ModelSpec m = windowed_model(5);
  m.window_layers = WindowLayers::Odd;
  const Schedule s = build_verified(m, seq_plan(m, 2));
  EXPECT_EQ(op_named(s, "L0.fwd.attn.core.s1").attrs.window, 0);
  EXPECT_EQ(op_named(s, "L0.fwd.attn.core.s1").in[1].s0, 0);
  EXPECT_EQ(op_named(s, "L1.fwd.attn.core.s1").attrs.window, 5);
  EXPECT_GT(op_named(s, "L1.fwd.attn.core.s1").in[1].s0, 0);
}

TEST(AttentionFeatures, WindowAsLongAsTheSequenceChangesNothing) {
  const ModelSpec plain = windowed_model(0);
  const Schedule a = build_verified(plain, seq_plan(plain, 2));
  for (int w : {16, 40}) {
    const ModelSpec m = windowed_model(w);
    const Schedule b = build_verified(m, seq_plan(m, 2));
    ASSERT_EQ(a.ops.size(), b.ops.size());
    for (size_t i = 0; i < a.ops.size(); ++i) {
      const Op &x = a.ops[i], &y = b.ops[i];
      EXPECT_EQ(op_id(x), op_id(y));
      EXPECT_EQ(x.in, y.in) << op_id(x);
      EXPECT_EQ(x.out, y.out) << op_id(x);
      EXPECT_EQ(x.attrs.window, y.attrs.window) << op_id(x);
      EXPECT_EQ(x.flops, y.flops) << op_id(x);
      EXPECT_EQ(x.bytes, y.bytes) << op_id(x);
      EXPECT_EQ(x.deps, y.deps) << op_id(x);
    }
  }
}

ModelSpec qk_model(QkNorm kind, int tp) {
  ModelSpec m = test::tiny_llama(tp);
  m.qk_norm = kind;
  return m;
}

TEST(AttentionFeatures, PerHeadQkNormSitsBetweenQkvAndRope) {
  const ModelSpec m = qk_model(QkNorm::PerHead, 2);
  const Schedule s = build_verified(m, make_strategy_plan("megatron-sync", m));
  const int64_t a_l = m.heads / m.tp, kv_l = m.kv_heads / m.tp, d = m.head_dim();
  const Op& qn = op_named(s, "L0.fwd.attn.qnorm.s0");
  const Op& kn = op_named(s, "L0.fwd.attn.knorm.s0");
  EXPECT_EQ(qn.attrs.head_dim, d);
  EXPECT_EQ(qn.in[0].cols(), a_l * d);
  EXPECT_EQ(kn.in[0].c0, a_l * d);
  EXPECT_EQ(kn.in[0].cols(), kv_l * d);
  EXPECT_EQ(qn.out[1].cols(), 2 * a_l);  // (mean, rstd) per head
  EXPECT_EQ(buffer_named(s, "L0.attn.qnorm.g").cols, d);
  EXPECT_EQ(buffer_named(s, "L0.attn.knorm.g").cols, d);
  // Rope and the core read the normalised queries and keys; V stays in qkv.
  const Op& rope = op_named(s, "L0.fwd.attn.rope.s0");
  const Op& core = op_named(s, "L0.fwd.attn.core.s0");
  EXPECT_EQ(rope.out[0].buffer, qn.out[0].buffer);
  EXPECT_EQ(core.in[0].buffer, qn.out[0].buffer);
  EXPECT_EQ(core.in[1].buffer, qn.out[0].buffer);
  EXPECT_EQ(core.in[2].buffer, qn.in[0].buffer);
  EXPECT_LT(qn.index, rope.index);
  // Backward: the norms' backward writes qkv's gradient after rope's backward; the gains get optimizer
  // steps without weight decay.
  EXPECT_LT(op_named(s, "L0.bwd.attn.rope.bwd.s0").index, op_named(s, "L0.bwd.attn.qnorm.bwd.s0").index);
  EXPECT_TRUE(has_op(s, "L0.bwd.attn.knorm.bwd.s0"));
  EXPECT_FALSE(op_named(s, "L0.opt.attn.qnorm.g").attrs.weight_decay);
  EXPECT_FALSE(op_named(s, "L0.opt.attn.knorm.g").attrs.weight_decay);
  // Without QK-norm none of this exists.
  const ModelSpec plain = qk_model(QkNorm::None, 2);
  EXPECT_FALSE(has_op(build_verified(plain, make_strategy_plan("megatron-sync", plain)), "L0.fwd.attn.qnorm.s0"));
}

TEST(AttentionFeatures, FullQkNormSpansTheProjectionAtTpOneAndIsRefusedAcrossRanks) {
  const ModelSpec m = qk_model(QkNorm::Full, 1);
  const Schedule s = build_verified(m, make_strategy_plan("megatron-sync", m));
  EXPECT_EQ(op_named(s, "L0.fwd.attn.qnorm.s0").attrs.head_dim, 0);
  EXPECT_EQ(buffer_named(s, "L0.attn.qnorm.g").cols, int64_t(m.heads) * m.head_dim());
  EXPECT_EQ(buffer_named(s, "L0.attn.knorm.g").cols, int64_t(m.kv_heads) * m.head_dim());
  try {
    validate_model(qk_model(QkNorm::Full, 2));
    FAIL() << "full QK-norm at tp 2 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find("qk_norm"), std::string::npos) << e.what();
  }
  ModelSpec ln = test::tiny_gpt(1);
  ln.qk_norm = QkNorm::PerHead;
  EXPECT_THROW(validate_model(ln), Error);
}

TEST(AttentionFeatures, PartialRotaryRotatesAndCostsFewerColumns) {
  ModelSpec m = test::tiny_llama(2);
  const Schedule full = build_verified(m, make_strategy_plan("megatron-sync", m));
  m.rotary_dims = m.head_dim() / 4;
  const Schedule part = build_verified(m, make_strategy_plan("megatron-sync", m));
  for (const char* id : {"L0.fwd.attn.rope.s0", "L0.bwd.attn.rope.bwd.s0"}) {
    const Op &a = op_named(full, id), &b = op_named(part, id);
    EXPECT_EQ(a.attrs.rotary_dims, 0);
    EXPECT_EQ(b.attrs.rotary_dims, m.rotary_dims);
    EXPECT_DOUBLE_EQ(b.bytes, a.bytes * m.rotary_dims / m.head_dim());
  }
}

}  // namespace
}  // namespace domino
