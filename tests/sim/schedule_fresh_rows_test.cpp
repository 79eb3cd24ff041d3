// schedule_fresh_rows_test.cpp: the bytes of a memory-bound op that a collective has just copied out on its
// core (Op::fresh_bytes, sim/ir/schedule_fresh_rows.cpp): the sequence-parallel residual add reads and writes
// in place the rows its ReduceScatter filled right before it; an add after an in-place AllReduce, or one
// whose collective ran beside other compute, has none.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "tests/sim/schedule_test_util.hpp"

namespace domino {
namespace {

bool forward_add(const Op& op) {
  return op.code == OpCode::ResidualAdd && op.phase == Phase::Forward && std::strcmp(op.name, "add") == 0;
}

TEST(FreshRows, TheSequenceParallelAddReadsTheRowsItsReduceScatterJustCopiedOut) {
  for (const ModelSpec& m : {test::tiny_gpt(), test::tiny_llama(), test::tiny_llama(4)}) {
    SCOPED_TRACE(m.name + " tp " + std::to_string(m.tp));
    const Schedule s = test::build_verified(m, make_strategy_plan("megatron-sp", m));
    int adds = 0;
    for (const Op& op : s.ops) {
      if (!forward_add(op)) continue;
      ++adds;
      ASSERT_FALSE(op.deps.empty());
      const Op& rs = s.ops[size_t(op.deps.back())];
      ASSERT_EQ(rs.code, OpCode::ReduceScatter) << op_id(op);
      const double rows = double(rs.out[0].elements()) * dtype_bytes(m.dtype);
      EXPECT_DOUBLE_EQ(op.fresh_from_bytes, rows) << op_id(op);
      EXPECT_DOUBLE_EQ(op.fresh_bytes, 2 * rows) << op_id(op);  // read and written in place
      EXPECT_LT(op.fresh_bytes, op.bytes) << op_id(op);         // the residual stream's rows come cold
    }
    EXPECT_EQ(adds, 2 * m.layers);
  }
}

TEST(FreshRows, NoneAfterAnInPlaceAllReduceOrACollectiveBesideOtherCompute) {
  const ModelSpec m = test::tiny_gpt();
  for (const char* name : {"megatron-sync", "megatron-async", "domino-deep", "domino-ds"}) {
    SCOPED_TRACE(name);
    const Schedule s = test::build_verified(m, make_strategy_plan(name, m));
    for (const Op& op : s.ops) {
      EXPECT_EQ(op.fresh_bytes, 0) << op_id(op);
      EXPECT_EQ(op.fresh_from_bytes, 0) << op_id(op);
    }
  }
  // Batch slices under sequence parallelism: each slice's ReduceScatter runs beside the compute that follows
  // it in the pipeline (the next slice's GEMMs, the next block's norm), so no add finds its rows in cache.
  Plan sliced = make_strategy_plan("megatron-sp", m);
  for (LayerPlan& layer : sliced.layers)
    for (BlockPlan* b : {&layer.attn, &layer.mlp})
      b->p = 2, b->dim = SplitDim::Batch, b->overlap = OverlapMode::Inter;
  const Schedule s = test::build_verified(m, sliced);
  int adds = 0;
  for (const Op& op : s.ops) {
    if (!forward_add(op)) continue;
    ++adds;
    EXPECT_EQ(op.fresh_bytes, 0) << op_id(op);
  }
  EXPECT_EQ(adds, 2 * 2 * m.layers);
}

}  // namespace
}  // namespace domino
