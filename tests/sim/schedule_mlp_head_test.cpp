// schedule_mlp_head_test.cpp: the MLP activation each model asks for (GeLU, ReLU, SwiGLU, GeGLU) as the IR's
// opcodes, with the gated ones reading [gate | up]; the verifier's rules for the new opcodes; and tied
// embeddings: no head weight, the head's GEMMs on the embedding's shard, both gradient contributions in
// one buffer in the right order, one optimizer step, parameter counts and memory that agree with
// derive_facts.
#include <gtest/gtest.h>

#include <string>

#include "sim/ir/schedule.hpp"
#include "tests/sim/schedule_index.hpp"
#include "tests/sim/schedule_test_util.hpp"

namespace domino {
namespace {

using test::build_verified;

const BufferDesc& buffer_of(const Schedule& s, const Region& r) { return s.buffers[size_t(r.buffer)]; }

struct ActivationCase {
  Activation activation;
  OpCode fwd, bwd;
  bool gated;
};

class MlpActivation : public ::testing::TestWithParam<ActivationCase> {};

TEST_P(MlpActivation, EveryActivationOpComputesTheModelsFunction) {
  const ActivationCase& c = GetParam();
  ModelSpec m = test::tiny_gpt(2);
  m.activation = c.activation;
  const int64_t f = m.ffn_per_rank();
  for (const auto& np : test::plans_for(m)) {
    SCOPED_TRACE(np.name);
    const Schedule s = build_verified(m, np.plan);
    int fwd = 0, bwd = 0;
    for (const Op& op : s.ops) {
      if (op.block != Block::Mlp || op.kind != OpKind::Activation) continue;
      const bool forward = op.phase == Phase::Forward;
      EXPECT_EQ(op.code, forward ? c.fwd : c.bwd) << op_id(op);
      // FC1's output: [gate | up] for the gated activations, one projection otherwise.
      EXPECT_EQ(buffer_of(s, op.in[0]).cols, c.gated ? 2 * f : f) << op_id(op);
      EXPECT_EQ(op.out[0].cols(), c.gated && forward ? f : op.in[0].cols()) << op_id(op);
      ++(forward ? fwd : bwd);
    }
    int slices = 0;
    for (const LayerPlan& lp : np.plan.layers) slices += lp.mlp.p;
    EXPECT_EQ(fwd, slices);
    EXPECT_EQ(bwd, slices);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Activations, MlpActivation,
    ::testing::Values(ActivationCase{Activation::Gelu, OpCode::GeluFwd, OpCode::GeluBwd, false},
                      ActivationCase{Activation::Relu, OpCode::ReluFwd, OpCode::ReluBwd, false},
                      ActivationCase{Activation::Swiglu, OpCode::SwigluFwd, OpCode::SwigluBwd, true},
                      ActivationCase{Activation::Geglu, OpCode::GegluFwd, OpCode::GegluBwd, true}),
    [](const auto& info) { return std::string(to_string(info.param.activation)); });

// The new opcodes' names and kinds, and memory-bound costs from their operands' bytes.
TEST(MlpActivationCosts, NewOpcodesAreNamedActivationsCostedByTheirBytes) {
  EXPECT_STREQ(to_string(OpCode::ReluFwd), "ReluFwd");
  EXPECT_STREQ(to_string(OpCode::GegluBwd), "GegluBwd");
  ModelSpec relu = test::tiny_gpt(2), geglu = relu;
  relu.activation = Activation::Relu, geglu.activation = Activation::Geglu;
  for (const ModelSpec& m : {relu, geglu}) {
    const Schedule s = build_verified(m, make_strategy_plan("megatron-sync", m));
    const test::IndexedSchedule ops(s);
    for (const char* id : {"L0.fwd.mlp.act.s0", "L0.bwd.mlp.act.bwd.s0"}) {
      const Op& op = ops.op(id);
      EXPECT_EQ(op.kind, OpKind::Activation) << id;
      EXPECT_TRUE(memory_bound(op.kind));
      double bytes = 0;
      for (int i = 0; i < op.n_in; ++i) bytes += double(op.in[size_t(i)].elements());
      for (int i = 0; i < op.n_out; ++i) bytes += double(op.out[size_t(i)].elements());
      EXPECT_EQ(op.bytes, bytes * dtype_bytes(m.dtype)) << id;
      EXPECT_GT(op.flops, 0) << id;
    }
  }
}

// The verifier holds the new opcodes to the element-wise and gated layouts.
TEST(MlpActivationVerify, RejectsOperandsOfTheWrongShape) {
  ModelSpec relu = test::tiny_gpt(2), geglu = relu;
  relu.activation = Activation::Relu, geglu.activation = Activation::Geglu;
  Schedule r = build_verified(relu, make_strategy_plan("megatron-sync", relu));
  Schedule g = build_verified(geglu, make_strategy_plan("megatron-sync", geglu));
  const auto problem = [](Schedule& s, const char* id, auto mutate) {
    const test::IndexedSchedule ops(s);
    Op& op = s.ops[size_t(ops.pos(id))];
    EXPECT_EQ(op_contract_problem(s, op), "") << id;
    mutate(op);
    return op_contract_problem(s, op);
  };
  EXPECT_NE(problem(r, "L0.fwd.mlp.act.s0", [](Op& op) { op.out[0].c1 -= 1; }).find("out[0]"),
            std::string::npos);
  EXPECT_NE(problem(r, "L0.bwd.mlp.act.bwd.s0", [](Op& op) { op.in[1].c1 -= 1; }).find("dy"),
            std::string::npos);
  EXPECT_NE(problem(r, "L1.bwd.mlp.act.bwd.s0", [](Op& op) { op.n_in = 1; }), "");
  EXPECT_NE(problem(g, "L0.fwd.mlp.act.s0", [](Op& op) { op.in[0].c1 -= 1; }).find("odd number of columns"),
            std::string::npos);
  // A GeGLU forward writing as many columns as it reads (an element-wise layout) is wrong.
  EXPECT_NE(problem(g, "L1.fwd.mlp.act.s0", [](Op& op) { op.out[0].c1 *= 2; }), "");
  EXPECT_NE(problem(g, "L0.bwd.mlp.act.bwd.s0", [](Op& op) { op.out[0].c1 /= 2; }).find("out[0]"),
            std::string::npos);
}

ModelSpec tied(ModelSpec m) {
  m.name += "-tied";
  m.tied_embeddings = true;
  return m;
}

int count_role(const Schedule& s, ParamKind kind) {
  int n = 0;
  for (const BufferDesc& b : s.buffers) n += b.param == kind;
  return n;
}

class TiedHead : public ::testing::TestWithParam<int> {};

TEST_P(TiedHead, HeadGemmsUseTheEmbeddingsShardAndShareItsGradient) {
  const int tp = GetParam();
  for (const ModelSpec& base : {test::tiny_gpt(tp), test::tiny_llama(tp)}) {
    const ModelSpec m = tied(base);
    SCOPED_TRACE(m.name);
    const Schedule s = build_verified(m, make_strategy_plan("megatron-sync", m));
    const test::IndexedSchedule ops(s);
    EXPECT_EQ(count_role(s, ParamKind::HeadWeight), 0) << "no head.w, nor its gradient or optimizer state";
    EXPECT_EQ(
        count_role(build_verified(base, make_strategy_plan("megatron-sync", base)), ParamKind::HeadWeight),
        4);
    const int64_t rows = int64_t(m.micro_batch) * m.seq_len, V_l = m.vocab_per_rank(), h = m.hidden;

    // Forward: logits = x E^T, E the [V_l, h] shard.
    const Op& logits = ops.op("head.fwd.logits");
    EXPECT_EQ(logits.code, OpCode::MatMulDgrad);
    EXPECT_EQ(buffer_of(s, logits.in[1]).name, "emb.tok");
    EXPECT_EQ(buffer_of(s, logits.in[1]).role, BufferRole::Param);
    EXPECT_EQ(logits.in[1].rows(), V_l);
    EXPECT_EQ(logits.out[0].cols(), V_l);
    EXPECT_EQ(logits.flops, 2.0 * double(rows) * double(V_l) * double(h));

    // Backward: dx = dlogits E; dE = dlogits^T x, the first writer of E's gradient.
    const Op& dgrad = ops.op("head.bwd.logits.dgrad");
    EXPECT_EQ(dgrad.code, OpCode::MatMul);
    EXPECT_EQ(dgrad.in[1], logits.in[1]);
    EXPECT_EQ(buffer_of(s, dgrad.out[0]).name, "grad.head.norm.y");
    const Op& wgrad = ops.op("head.bwd.logits.wgrad");
    EXPECT_EQ(wgrad.code, OpCode::MatMulWgrad);
    EXPECT_EQ(buffer_of(s, wgrad.in[0]).name, "logits.grad");
    EXPECT_EQ(buffer_of(s, wgrad.in[1]).name, "head.norm.y");
    EXPECT_EQ(buffer_of(s, wgrad.out[0]).name, "emb.tok.grad");
    EXPECT_FALSE(wgrad.attrs.accumulate);
    EXPECT_EQ(wgrad.flops, logits.flops);

    // The embedding's scatter comes after and adds; the positions' gradient still starts there.
    const Op& emb = ops.op("emb.bwd");
    EXPECT_GT(emb.index, wgrad.index);
    EXPECT_EQ(emb.out[0], wgrad.out[0]);
    EXPECT_TRUE(emb.attrs.accumulate);
    EXPECT_FALSE(emb.attrs.accumulate_params);
    int writers = 0;
    for (const Op& op : s.ops)
      for (int i = 0; i < op.n_out; ++i) writers += op.out[size_t(i)].buffer == wgrad.out[0].buffer;
    EXPECT_EQ(writers, 2) << "the head's weight gradient and the embedding's scatter";

    // One optimizer step on the shared weight, none for a head weight.
    int steps = 0;
    for (const Op& op : s.ops) {
      if (op.phase != Phase::Optimizer) continue;
      EXPECT_NE(op_id(op), "head.opt.w");
      steps += op.out[0] == logits.in[1];
    }
    EXPECT_EQ(steps, 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Tp, TiedHead, ::testing::Values(1, 2, 4));

TEST(TiedHeadUntied, UntiedHeadKeepsItsOwnWeightAndTheEmbeddingWritesItsGradient) {
  const ModelSpec m = test::tiny_gpt(2);
  const test::IndexedSchedule ops(build_verified(m, make_strategy_plan("megatron-sync", m)));
  EXPECT_EQ(ops.op("head.fwd.logits").code, OpCode::MatMul);
  EXPECT_EQ(buffer_of(ops.s, ops.op("head.fwd.logits").in[1]).name, "head.w");
  EXPECT_EQ(buffer_of(ops.s, ops.op("head.bwd.logits.wgrad").out[0]).name, "head.w.grad");
  EXPECT_FALSE(ops.op("emb.bwd").attrs.accumulate);
  EXPECT_TRUE(ops.at.count("head.opt.w"));
}

// Per-rank parameters allocated by the schedule equal derive_facts' count (head weight 0 when tied), also
// with a padded vocabulary; memory drops by the head weight's share, the GEMMs' FLOPs do not change.
TEST(TiedHeadFacts, ParametersMemoryAndFlopsAgreeWithTheFacts) {
  for (const ModelSpec& base : {test::tiny_gpt(1), test::tiny_llama(1)}) {
    for (const int tp : {1, 2, 4}) {
      for (const int vocab : {40, 42}) {
        ModelSpec u = base;
        u.tp = tp, u.vocab = vocab;
        const ModelSpec t = tied(u);
        const Schedule su = build_verified(u, make_strategy_plan("megatron-sync", u));
        const Schedule st = build_verified(t, make_strategy_plan("megatron-sync", t));
        int64_t allocated = 0;
        for (const BufferDesc& b : st.buffers)
          if (b.role == BufferRole::Param) allocated += b.elements();
        EXPECT_EQ(derive_facts(t).params_per_rank, allocated) << t.name << " tp " << tp << " vocab " << vocab;
        EXPECT_LT(schedule_memory_bytes(st), schedule_memory_bytes(su));
        double flops_u = 0, flops_t = 0;
        for (const Op& op : su.ops) flops_u += op.flops;
        for (const Op& op : st.ops) flops_t += op.flops;
        // The head's GEMMs cost the same; the optimizer no longer steps the head weight.
        EXPECT_LT(flops_t, flops_u);
        double gemm_u = 0, gemm_t = 0;
        for (const Op& op : su.ops) gemm_u += op.kind == OpKind::Gemm ? op.flops : 0;
        for (const Op& op : st.ops) gemm_t += op.kind == OpKind::Gemm ? op.flops : 0;
        EXPECT_EQ(gemm_t, gemm_u);
      }
    }
  }
}

}  // namespace
}  // namespace domino
