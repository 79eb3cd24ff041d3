// optimizer_decay_test.cpp: the schedule marks exactly the parameter matrices (GEMM weights, embedding and
// position tables, the head) for weight decay, never a vector (bias, norm gain or shift), as Megatron-LM's
// parameter groups do, for both optimizers and both model families.
#include <gtest/gtest.h>

#include "tests/sim/schedule_test_util.hpp"

namespace domino {
namespace {

void expect_matrices_decay(const ModelSpec& m, OptimizerKind optimizer) {
  BuildOptions o;
  o.optimizer = optimizer;
  const Schedule s = test::build_verified(m, make_strategy_plan("megatron-sync", m), o);
  int decaying = 0, steady = 0;
  for (const Op& op : s.ops) {
    if (op.code != OpCode::AdamStep && op.code != OpCode::SgdStep) continue;
    const BufferDesc& param = s.buffers[size_t(op.out[0].buffer)];
    const bool matrix = param.batch * param.seq > 1;
    EXPECT_EQ(op.attrs.weight_decay, matrix) << op_id(op) << " on " << param.name;
    (op.attrs.weight_decay ? decaying : steady)++;
  }
  EXPECT_GT(decaying, 0);
  EXPECT_GT(steady, 0);
}

TEST(OptimizerDecay, MatricesDecayVectorsDoNot) {
  for (OptimizerKind k : {OptimizerKind::Adam, OptimizerKind::SgdMomentum}) {
    expect_matrices_decay(test::tiny_gpt(), k);
    expect_matrices_decay(test::tiny_llama(), k);
  }
}

}  // namespace
}  // namespace domino
