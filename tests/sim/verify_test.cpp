// verify_test.cpp: the IR verifier (sim/ir/verify.hpp). Every schedule the builder emits passes it; each of
// its checks can fail: one mutation of a built schedule per check, rejected as BadInput naming the op (or
// the buffer) and saying what is wrong.
#include "sim/ir/verify.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "sim/base/error.hpp"
#include "tests/sim/schedule_test_util.hpp"

namespace domino {
namespace {

// Expects verify(s) to throw BadInput whose message holds every needle.
void expect_rejected(const std::function<void()>& verify, const std::vector<std::string>& needles) {
  try {
    verify();
    ADD_FAILURE() << "expected a BadInput mentioning " << needles.back();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput) << e.what();
    const std::string msg = e.what();
    for (const std::string& n : needles)
      EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' in: " << msg;
  }
}

Schedule built(bool llama, OptimizerKind optimizer = OptimizerKind::Adam) {
  const ModelSpec m = llama ? test::tiny_llama(2) : test::tiny_gpt(2);
  BuildOptions o;
  o.optimizer = optimizer;
  // domino-ds refuses Llama models: its GPT schedule and domino-deep's Llama one.
  return test::build_verified(m, make_strategy_plan(llama ? "domino-deep" : "domino-ds", m), o);
}

Op& first(Schedule& s, OpCode code, const std::function<bool(const Op&)>& also = {}) {
  for (Op& op : s.ops)
    if (op.code == code && (!also || also(op))) return op;
  throw std::runtime_error(std::string("no op ") + to_string(code));
}

// The op's id and index both appear, as "op <id> (#<index>)".
std::string named(const Op& op) { return "op " + op_id(op) + " (#" + std::to_string(op.index) + ")"; }

// Which op of which built schedule a mutation applies to: the first of its opcode (that satisfies `also`).
struct Target {
  bool llama = false;
  OpCode code = OpCode::MatMul;
  std::function<bool(const Op&)> also = {};
  OptimizerKind optimizer = OptimizerKind::Adam;
};

// Mutates one op of a freshly built schedule; both verify_schedule and verify_op must reject it.
void expect_op_rejected(const Target& target, const std::function<void(Schedule&, Op&)>& mutate,
                        const std::string& detail) {
  Schedule s = built(target.llama, target.optimizer);
  Op& op = first(s, target.code, target.also);
  mutate(s, op);
  const OpCode code = target.code;
  SCOPED_TRACE(std::string(to_string(code)) + ": " + detail);
  expect_rejected([&] { verify_schedule(s); }, {named(op), detail});
  expect_rejected([&] { verify_op(s, op); }, {named(op), detail});
  EXPECT_NE(op_contract_problem(s, op).find(detail), std::string::npos);
}

TEST(Verify, EveryBuiltScheduleIsAccepted) {
  for (const ModelSpec& m : test::small_models()) {
    for (const test::NamedPlan& np : test::plans_for(m)) {
      SCOPED_TRACE(m.name + " / " + np.name);
      for (OptimizerKind k : {OptimizerKind::Adam, OptimizerKind::SgdMomentum}) {
        BuildOptions o;
        o.optimizer = k;
        const Schedule s = build_schedule(m, np.plan, o);
        EXPECT_NO_THROW(verify_schedule(s));
        for (const Op& op : s.ops) EXPECT_EQ(op_contract_problem(s, op), "") << op_id(op);
      }
    }
  }
}

TEST(Verify, BufferWithAnEmptyExtent) {
  Schedule s = built(false);
  s.buffers[2].cols = 0;
  expect_rejected([&] { verify_schedule(s); }, {"buffer 2 '" + s.buffers[2].name + "'", "must be positive"});
}

TEST(Verify, OpAtTheWrongIndex) {
  Schedule s = built(false);
  s.ops[5].index = 6;
  expect_rejected([&] { verify_schedule(s); }, {"(#5)", "stands at position 5 but has index 6"});
}

TEST(Verify, OpOnAnUnknownStream) {
  Schedule s = built(false);
  s.ops[3].stream = Stream(7);
  expect_rejected([&] { verify_schedule(s); }, {named(s.ops[3]), "runs on stream 7 of 2"});
}

TEST(Verify, DependencyOnALaterOp) {
  Schedule s = built(false);
  Op& op = first(s, OpCode::ResidualAdd, [](const Op& o) { return !o.deps.empty(); });
  op.deps.back() = op.index + 1;
  expect_rejected([&] { verify_schedule(s); }, {named(op), "which is not an earlier op"});
  op.deps.back() = -1;
  expect_rejected([&] { verify_schedule(s); }, {named(op), "depends on #-1"});
}

TEST(Verify, DependenciesNotAscending) {
  Schedule s = built(false);
  Op& op = first(s, OpCode::ResidualAdd, [](const Op& o) { return !o.deps.empty(); });
  op.deps.push_back(op.deps.front());
  expect_rejected([&] { verify_schedule(s); }, {named(op), "not ascending"});
}

TEST(Verify, DependencyOnItsOwnStream) {
  Schedule s = built(false);
  for (Op& op : s.ops) {
    if (op.deps.empty()) continue;
    for (int32_t i = op.index - 1; i > op.deps.back(); --i) {
      if (s.ops[size_t(i)].stream != op.stream) continue;
      op.deps.push_back(i);
      expect_rejected([&] { verify_schedule(s); },
                      {named(op), std::string("of its own ") + to_string(op.stream) + " stream"});
      return;
    }
  }
  FAIL() << "no op with a dependency has an op of its own stream after that dependency";
}

TEST(Verify, DuplicateOpId) {
  Schedule s = built(false);
  Op& a = s.ops[4];
  Op& b = s.ops[9];
  b.layer = a.layer, b.phase = a.phase, b.block = a.block, b.name = a.name, b.slice = a.slice,
  b.chunk = a.chunk;
  expect_rejected([&] { verify_schedule(s); }, {named(b), "has the id of op #4"});
  EXPECT_NO_THROW(verify_ops(s)) << "the contract alone does not care about ids";
}

TEST(Verify, RegionsOutsideTheirBuffers) {
  expect_op_rejected(
      {false, OpCode::MatMul},
      [](Schedule& s, Op& op) { op.in[0].c1 = s.buffers[size_t(op.in[0].buffer)].cols + 1; }, "in[0] [");
  expect_op_rejected(
      {false, OpCode::GeluFwd},
      [](Schedule& s, Op& op) { op.out[0].b1 = s.buffers[size_t(op.out[0].buffer)].batch + 1; },
      "is outside buffer '");
  expect_op_rejected(
      {false, OpCode::GeluFwd}, [](Schedule& s, Op& op) { op.in[0].buffer = int32_t(s.buffers.size()); },
      "in[0] names buffer");
  expect_op_rejected(
      {false, OpCode::GeluFwd}, [](Schedule&, Op& op) { op.in[0].s0 = op.in[0].s1 + 1; },
      "is outside buffer");
}

TEST(Verify, OperandCounts) {
  expect_op_rejected(
      {false, OpCode::MatMul}, [](Schedule&, Op& op) { op.n_in = 1; }, "expected 2..3 and 1");
  expect_op_rejected(
      {false, OpCode::GeluFwd}, [](Schedule&, Op& op) { op.n_in = 0; }, "has no inputs");
  expect_op_rejected(
      {false, OpCode::GeluFwd}, [](Schedule&, Op& op) { op.n_out = 0; }, "has no outputs");
  expect_op_rejected(
      {false, OpCode::GeluFwd}, [](Schedule&, Op& op) { op.n_in = kMaxIn + 1; }, "too many operands");
  expect_op_rejected(
      {false, OpCode::AllReduce}, [](Schedule&, Op& op) { op.in[1] = op.in[0], op.n_in = 2; },
      "has 2 inputs and");
  expect_op_rejected(
      {false, OpCode::AllReduce}, [](Schedule&, Op& op) { op.in[1] = op.in[0], op.n_in = 2; },
      "expected 1 and 1");
  // An AllReduce is in place: it must write the very region it reduces, and must write something.
  expect_op_rejected(
      {false, OpCode::AllReduce}, [](Schedule&, Op& op) { op.n_out = 0; }, "has no outputs");
  expect_op_rejected(
      {false, OpCode::AllReduce}, [](Schedule&, Op& op) { op.out[0].c1 -= 1; },
      "reduces in[0] but writes a different out[0]");
  expect_op_rejected(
      {false, OpCode::GeluFwd}, [](Schedule&, Op& op) { op.code = OpCode(99); }, "unknown opcode 99");
}

TEST(Verify, GemmShapes) {
  expect_op_rejected(
      {false, OpCode::MatMul}, [](Schedule&, Op& op) { op.in[1].s1 -= 1; }, "expected 32x*");
  expect_op_rejected(
      {false, OpCode::MatMul}, [](Schedule&, Op& op) { op.out[0].c1 -= 1; }, "out[0]");
  expect_op_rejected(
      {false, OpCode::MatMul},
      [](Schedule& s, Op& op) {
        op.in[1] = op.in[0];  // an activation with several batch entries and a partial seq range
        op.in[1].s1 = s.buffers[size_t(op.in[1].buffer)].seq - 1;
        op.in[1].b0 = 0, op.in[1].b1 = 2;
      },
      "must be one strided block");
  expect_op_rejected(
      {false, OpCode::MatMulDgrad}, [](Schedule&, Op& op) { op.in[1].c1 -= 1; }, "in[1]");
  expect_op_rejected(
      {false, OpCode::MatMulWgrad}, [](Schedule&, Op& op) { op.in[1].s1 -= 1; }, "in[1]");
  expect_op_rejected(
      {false, OpCode::MatMulWgrad, [](const Op& o) { return o.n_out == 2; }},
      [](Schedule&, Op& op) { op.out[1].c1 -= 1; }, "bias grad");
}

TEST(Verify, NormShapes) {
  expect_op_rejected(
      {false, OpCode::LayerNormFwd}, [](Schedule&, Op& op) { op.in[2].c1 -= 1; }, "beta");
  expect_op_rejected(
      {false, OpCode::LayerNormFwd}, [](Schedule&, Op& op) { op.out[1].c1 -= 1; }, "stats");
  expect_op_rejected(
      {true, OpCode::RmsNormFwd}, [](Schedule&, Op& op) { op.in[1].c1 -= 1; }, "gamma");
  expect_op_rejected(
      {false, OpCode::LayerNormBwd}, [](Schedule&, Op& op) { op.attrs.chunks = 0; }, "has chunks=0");
  expect_op_rejected(
      {false, OpCode::LayerNormBwd}, [](Schedule&, Op& op) { op.out[0].c1 -= 1; }, "dx");
  expect_op_rejected(
      {true, OpCode::RmsNormBwd}, [](Schedule&, Op& op) { op.in[3].c1 -= 1; }, "in[3]");
  expect_op_rejected(
      {false, OpCode::LayerNormBwd, [](const Op& o) { return o.n_out == 3; }},
      [](Schedule&, Op& op) { op.out[2].c1 -= 1; }, "dbeta");
}

TEST(Verify, ActivationShapes) {
  expect_op_rejected(
      {false, OpCode::GeluBwd}, [](Schedule&, Op& op) { op.in[1].c1 -= 1; }, "dy");
  expect_op_rejected(
      {true, OpCode::SwigluFwd}, [](Schedule&, Op& op) { op.in[0].c1 -= 1; }, "odd number of columns");
  expect_op_rejected(
      {true, OpCode::SwigluBwd}, [](Schedule&, Op& op) { op.out[0].c1 -= 2; }, "out[0]");
  expect_op_rejected(
      {true, OpCode::RopeFwd}, [](Schedule&, Op& op) { op.attrs.head_dim = 3; }, "head_dim must be even");
}

TEST(Verify, AttentionShapes) {
  expect_op_rejected(
      {true, OpCode::AttnFwd}, [](Schedule&, Op& op) { op.attrs.kv_heads = 3; },
      "heads a multiple of kv_heads");
  expect_op_rejected(
      {false, OpCode::AttnFwd}, [](Schedule&, Op& op) { op.in[1].s0 = 1; }, "K/V must start at seq 0");
  expect_op_rejected(
      {false, OpCode::AttnFwd}, [](Schedule&, Op& op) { op.in[2].c1 -= 1; }, "V [");
  expect_op_rejected(
      {false, OpCode::AttnFwd}, [](Schedule&, Op& op) { op.out[1].c1 -= 1; }, "P has");
  expect_op_rejected(
      {false, OpCode::AttnBwd}, [](Schedule&, Op& op) { op.in[4].c1 -= 1; }, "dcontext");
  expect_op_rejected(
      {true, OpCode::AttnBwd}, [](Schedule&, Op& op) { op.out[1].c1 -= 1; }, "dK");
}

TEST(Verify, ElementwiseEmbeddingLossAndOptimizerShapes) {
  expect_op_rejected(
      {false, OpCode::ResidualAdd}, [](Schedule&, Op& op) { op.in[1].c1 -= 1; }, "in[1]");
  expect_op_rejected(
      {false, OpCode::EmbeddingFwd}, [](Schedule&, Op& op) { op.in[0].c1 = 0; }, "token ids");
  expect_op_rejected(
      {false, OpCode::PositionAdd}, [](Schedule&, Op& op) { op.in[1].s1 -= 1; },
      "positional table does not cover seq");
  expect_op_rejected(
      {false, OpCode::EmbeddingBwd}, [](Schedule&, Op& op) { op.out[0].c1 -= 1; }, "table");
  expect_op_rejected(
      {false, OpCode::EmbeddingFwd}, [](Schedule&, Op& op) { op.attrs.vocab = -1; }, "has vocab=-1");
  expect_op_rejected(
      {false, OpCode::CrossEntropy}, [](Schedule&, Op& op) { op.out[1].c1 -= 1; }, "dlogits");
  expect_op_rejected(
      {true, OpCode::CrossEntropy}, [](Schedule&, Op& op) { op.in[3].c1 -= 1; }, "sums");
  expect_op_rejected(
      {true, OpCode::LogitSumExp}, [](Schedule&, Op& op) { op.in[2].b1 -= 1; }, "max");
  expect_op_rejected(
      {false, OpCode::LogitMax}, [](Schedule&, Op& op) { op.out[0] = op.in[0]; }, "max");
  expect_op_rejected(
      {false, OpCode::AllReduce}, [](Schedule&, Op& op) { op.attrs.reduce = ReduceOp(7); }, "unknown reduction");
  expect_op_rejected(
      {false, OpCode::AdamStep}, [](Schedule&, Op& op) { op.out[2].c1 -= 1; }, "out[2]");
  expect_op_rejected(
      {false, OpCode::SgdStep, {}, OptimizerKind::SgdMomentum}, [](Schedule&, Op& op) { op.out[1].c1 -= 1; },
      "out[1]");
}

}  // namespace
}  // namespace domino
