// schedule_invariants_test.cpp: properties every schedule must have, for every strategy and a spread of
// custom plans on GPT and Llama models: slicing changes neither the GEMM work nor the AllReduce volume,
// ids are unique and readable, deps point backwards across streams, regions stay inside their buffers,
// and building is deterministic.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "sim/base/error.hpp"
#include "tests/sim/schedule_test_util.hpp"

namespace domino {
namespace {

using test::NamedPlan;

double gemm_flops(const Schedule& s) {
  double f = 0;
  for (const Op& op : s.ops) f += op.kind == OpKind::Gemm ? op.flops : 0;
  return f;
}

// The messages of the collectives of `code`, leaving out the AllReduces of parameter gradients (sequence
// parallelism's norm gradients, checked in schedule_sp_test.cpp).
double collective_bytes(const Schedule& s, OpCode code) {
  double b = 0;
  for (const Op& op : s.ops) {
    const bool grad = s.buffers[size_t(op.out[0].buffer)].role == BufferRole::Grad;
    b += op.code == code && !grad ? op.bytes : 0;
  }
  return b;
}

// Forward GEMMs of the unsliced model per rank, computed from the model alone; backward is twice that.
double expected_gemm_flops(const ModelSpec& m) {
  const double B = m.micro_batch, S = m.seq_len, h = m.hidden, d = m.head_dim();
  const double qkv = (m.heads_per_rank() + 2.0 * m.kv_heads_per_rank()) * d;
  const double fc1 = (m.activation == Activation::Swiglu ? 2.0 : 1.0) * m.ffn_per_rank();
  const double layer = 2 * B * S * (h * qkv + m.heads_per_rank() * d * h + h * fc1 + m.ffn_per_rank() * h);
  const double head = 2 * B * S * h * m.vocab_per_rank();  // vocab-parallel: this rank's columns
  return 3 * (m.layers * layer + head);
}

void check_invariants(const ModelSpec& m, const NamedPlan& np) {
  SCOPED_TRACE(m.name + " / " + np.name);
  const Schedule s = test::build_verified(m, np.plan);
  ASSERT_FALSE(s.ops.empty());
  EXPECT_DOUBLE_EQ(gemm_flops(s), expected_gemm_flops(m));
  // 4 per layer of [B, S, h]; outside the layers 2 more of that size (embedding, head input gradient) and
  // the cross-entropy's [B, S, 1] max and [B, S, 2] sums. Sequence parallelism: the [B, S, h] ones are
  // ReduceScatters of the same messages.
  const double tokens = double(m.micro_batch) * m.seq_len, eb = dtype_bytes(m.dtype);
  const double blocks = np.plan.comm_enabled ? (4.0 * m.layers + 2.0) * tokens * m.hidden * eb : 0.0;
  const double loss = np.plan.comm_enabled ? 3.0 * tokens * eb : 0.0;
  const bool sp = np.plan.sequence_parallel;
  EXPECT_DOUBLE_EQ(collective_bytes(s, OpCode::AllReduce), sp ? loss : blocks + loss);
  EXPECT_DOUBLE_EQ(collective_bytes(s, OpCode::ReduceScatter), sp ? blocks : 0.0);

  static const std::regex layer_id(R"(L\d+\.(fwd|bwd)\.(attn|mlp)\.[a-z0-9.]+\.s\d+(\.c\d+)?)");
  static const std::regex opt_id(R"((L\d+|emb|head)\.opt\.[a-z0-9.]+)");
  static const std::regex other_id(R"((emb|head)\.(fwd|bwd)(\.[a-z.]+)?|head\.loss)");
  static const std::regex norm_grad_id(R"(L\d+\.bwd\.(attn|mlp)\.norm\.[gb]\.ar)");  // sequence parallelism
  std::set<std::string> ids;
  for (const Op& op : s.ops) {
    const std::string id = op_id(op);
    EXPECT_TRUE(ids.insert(id).second) << "duplicate id " << id;
    EXPECT_TRUE(std::regex_match(id, layer_id) || std::regex_match(id, opt_id) ||
                std::regex_match(id, other_id) || std::regex_match(id, norm_grad_id))
        << "malformed id " << id;
    EXPECT_EQ(op.kind, kind_of(op.code)) << id;
    EXPECT_EQ(op.index, &op - s.ops.data()) << id;
    EXPECT_EQ(op.stream == Stream::Comm, collective(op.kind)) << id;
    EXPECT_EQ(op.dtype, m.dtype) << id;
    EXPECT_GT(op.n_out, 0) << id;
    if (op.kind == OpKind::Gemm) {
      EXPECT_GT(op.m * op.n * op.k, 0) << id;
    }
    EXPECT_GT(op.bytes, 0) << id;
    for (size_t i = 0; i < op.deps.size(); ++i) {
      const int32_t d = op.deps[i];
      ASSERT_GE(d, 0) << id;
      ASSERT_LT(d, op.index) << id << " depends on a later op";
      EXPECT_NE(s.ops[size_t(d)].stream, op.stream)
          << id << " has a same-stream dep on " << op_id(s.ops[size_t(d)]);
      if (i > 0) {
        EXPECT_LT(op.deps[i - 1], d) << id << ": deps not sorted and unique";
      }
    }
    const auto check_region = [&](const Region& r) {
      ASSERT_TRUE(r.valid()) << id;
      ASSERT_LT(size_t(r.buffer), s.buffers.size()) << id;
      const BufferDesc& b = s.buffers[size_t(r.buffer)];
      EXPECT_TRUE(0 <= r.b0 && r.b0 < r.b1 && r.b1 <= b.batch) << id << " " << b.name;
      EXPECT_TRUE(0 <= r.s0 && r.s0 < r.s1 && r.s1 <= b.seq) << id << " " << b.name;
      EXPECT_TRUE(0 <= r.c0 && r.c0 < r.c1 && r.c1 <= b.cols) << id << " " << b.name;
    };
    for (int i = 0; i < op.n_in; ++i) check_region(op.in[size_t(i)]);
    for (int i = 0; i < op.n_out; ++i) check_region(op.out[size_t(i)]);
    if (op.code == OpCode::AllReduce) {
      // Collectives work on whole, contiguous buffers.
      EXPECT_EQ(op.out[0].elements(), s.buffers[size_t(op.out[0].buffer)].elements()) << id;
    }
  }
  std::set<std::string> names;
  for (const BufferDesc& b : s.buffers)
    EXPECT_TRUE(names.insert(b.name).second) << "duplicate buffer " << b.name;
  EXPECT_GT(schedule_memory_bytes(s), 0);
}

TEST(ScheduleInvariants, SmallModelsEveryPlan) {
  for (const ModelSpec& m : test::small_models()) {
    for (const NamedPlan& np : test::plans_for(m)) check_invariants(m, np);
  }
}

TEST(ScheduleInvariants, RealSizes) {
  for (const ModelSpec& m : {test::gpt3_13b(), test::llama2_70b()}) {
    const auto plans = test::plans_for(m);
    for (const NamedPlan& np : plans) {
      if (np.name == "megatron-sync" || np.name == "domino-ds" || np.name == "seq-p4-q2-inter" ||
          np.name == "mixed-per-layer") {
        check_invariants(m, np);
      }
    }
  }
}

TEST(ScheduleInvariants, NoCommHasNoAllReduceAndSameCompute) {
  const ModelSpec m = test::tiny_llama();
  const Schedule sync = test::build_verified(m, make_strategy_plan("megatron-sync", m));
  const Schedule bound = test::build_verified(m, make_strategy_plan("no-comm", m));
  size_t ars = 0;
  for (const Op& op : sync.ops) ars += op.code == OpCode::AllReduce;
  // 4 per layer; the embedding's, the head's input gradient's and the cross-entropy's two.
  EXPECT_EQ(ars, 4u * size_t(m.layers) + 4u);
  EXPECT_EQ(bound.ops.size(), sync.ops.size() - ars);
  for (const Op& op : bound.ops) {
    EXPECT_NE(op.code, OpCode::AllReduce);
    EXPECT_TRUE(op.deps.empty()) << op_id(op);
  }
}

TEST(ScheduleInvariants, Deterministic) {
  for (const ModelSpec& m : test::small_models()) {
    for (const NamedPlan& np : test::plans_for(m)) {
      const Schedule a = test::build_verified(m, np.plan);
      const Schedule b = test::build_verified(m, np.plan);
      ASSERT_EQ(a.ops.size(), b.ops.size());
      ASSERT_EQ(a.buffers.size(), b.buffers.size());
      for (size_t i = 0; i < a.buffers.size(); ++i) {
        EXPECT_EQ(a.buffers[i].name, b.buffers[i].name);
        EXPECT_EQ(a.buffers[i].elements(), b.buffers[i].elements());
      }
      for (size_t i = 0; i < a.ops.size(); ++i) {
        const Op &x = a.ops[i], &y = b.ops[i];
        EXPECT_EQ(op_id(x), op_id(y));
        EXPECT_EQ(x.deps, y.deps);
        EXPECT_EQ(x.flops, y.flops);
        EXPECT_EQ(x.bytes, y.bytes);
        EXPECT_EQ(x.n_in, y.n_in);
        for (int r = 0; r < x.n_in; ++r) EXPECT_EQ(x.in[size_t(r)].buffer, y.in[size_t(r)].buffer);
      }
    }
  }
}

TEST(ScheduleInvariants, OptimizerStepsEveryParameter) {
  const ModelSpec m = test::tiny_gpt();
  for (const OptimizerKind k : {OptimizerKind::Adam, OptimizerKind::SgdMomentum}) {
    BuildOptions o;
    o.optimizer = k;
    const Schedule s = test::build_verified(m, make_strategy_plan("megatron-sync", m), o);
    size_t params = 0, steps = 0, states = 0;
    for (const BufferDesc& b : s.buffers)
      params += b.role == BufferRole::Param, states += b.role == BufferRole::OptState;
    for (const Op& op : s.ops) steps += op.kind == OpKind::Optimizer;
    EXPECT_EQ(steps, params);
    EXPECT_EQ(states, params * (k == OptimizerKind::Adam ? 2 : 1));
  }
  BuildOptions none;
  none.include_optimizer = false;
  const Schedule s = test::build_verified(m, make_strategy_plan("megatron-sync", m), none);
  for (const Op& op : s.ops) EXPECT_NE(op.phase, Phase::Optimizer);
  for (const BufferDesc& b : s.buffers) EXPECT_NE(b.role, BufferRole::OptState);
}

TEST(ScheduleInvariants, ParamsMatchModelFacts) {
  for (const ModelSpec& m : {test::tiny_gpt(2), test::tiny_llama(2), test::gpt3_13b()}) {
    const Schedule s = test::build_verified(m, make_strategy_plan("megatron-sync", m));
    int64_t params = 0;
    for (const BufferDesc& b : s.buffers) params += b.role == BufferRole::Param ? b.elements() : 0;
    EXPECT_EQ(params, derive_facts(m).params_per_rank) << m.name;
  }
}

TEST(ScheduleInvariants, RejectsPlansThatDoNotFit) {
  ModelSpec m = test::tiny_gpt();
  Plan p = make_strategy_plan("megatron-sync", m);
  p.layers.pop_back();
  EXPECT_THROW(build_schedule(m, p), Error);
  p = make_uniform_plan(m, {SplitDim::Batch, 3, 1, OverlapMode::None, false}, {}, "custom");
  EXPECT_THROW(build_schedule(m, p), Error);
}

}  // namespace
}  // namespace domino
