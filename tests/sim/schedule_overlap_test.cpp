// schedule_overlap_test.cpp: the stage order and waits that make (or forbid) overlap: Megatron's blocking
// AllReduces, the async backward, Domino's slice pipeline with the inter-layer crossing, the fallback when
// rows intersect, column chunks, and the causal cost of sequence slices.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "tests/sim/schedule_index.hpp"
#include "tests/sim/schedule_test_util.hpp"

namespace domino {
namespace {

using Indexed = test::IndexedSchedule;

bool has_dep(const Op& op, int32_t d) {
  return std::find(op.deps.begin(), op.deps.end(), d) != op.deps.end();
}

TEST(ScheduleOverlap, MegatronSyncEveryAllReduceBlocks) {
  const ModelSpec m = test::tiny_gpt();
  const Indexed x(test::build_verified(m, make_strategy_plan("megatron-sync", m)));
  int checked = 0;
  for (const Op& ar : x.s.ops) {
    if (ar.code != OpCode::AllReduce) continue;
    const Op& next = x.next_compute(ar.index);
    EXPECT_TRUE(has_dep(next, ar.index)) << op_id(next) << " does not wait for " << op_id(ar);
    if (ar.phase == Phase::Backward) {
      EXPECT_EQ(next.code, OpCode::MatMulWgrad) << op_id(next);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 4 * m.layers + 4);  // + embedding, head input gradient, cross-entropy max and sums
}

TEST(ScheduleOverlap, MegatronAsyncRunsBackwardAllReduceBehindWgrad) {
  const ModelSpec m = test::tiny_llama();
  const Indexed x(test::build_verified(m, make_strategy_plan("megatron-async", m)));
  for (const Op& ar : x.s.ops) {
    if (ar.code != OpCode::AllReduce) continue;
    const Op& next = x.next_compute(ar.index);
    if (ar.phase == Phase::Forward) {
      EXPECT_TRUE(has_dep(next, ar.index)) << op_id(ar);
      continue;
    }
    EXPECT_EQ(next.code, OpCode::MatMulWgrad);
    EXPECT_FALSE(has_dep(next, ar.index)) << op_id(next) << " should overlap " << op_id(ar);
    EXPECT_TRUE(has_dep(x.next_compute(next.index), ar.index)) << "the op after " << op_id(next);
  }
  EXPECT_TRUE(x.waits("L1.bwd.mlp.norm.bwd.s0", "L1.bwd.mlp.ar.s0"));
}

// The deep order (domino-deep); DeepSpeed's order (domino-ds) is pinned in schedule_order_test.cpp.
TEST(ScheduleOverlap, DominoDeepPipelinesSlicesAndCrossesBlocks) {
  const ModelSpec m = test::tiny_gpt();
  const Indexed x(test::build_verified(m, make_strategy_plan("domino-deep", m)));
  // Forward: slice 1 computes while slice 0's AllReduce runs.
  EXPECT_TRUE(x.op("L0.fwd.attn.norm.s1").deps.empty());
  EXPECT_TRUE(x.op("L0.fwd.attn.qkv.s1").deps.empty());
  EXPECT_LT(x.pos("L0.fwd.attn.ar.s0"), x.pos("L0.fwd.attn.norm.s1"));
  EXPECT_LT(x.pos("L0.fwd.attn.ar.s1"), x.pos("L0.fwd.attn.add.s0"));
  // Inter: the last residual add waits until the next block's first slice has been issued.
  EXPECT_LT(x.pos("L0.fwd.mlp.ar.s0"), x.pos("L0.fwd.attn.add.s1"));
  EXPECT_LT(x.pos("L0.fwd.attn.add.s1"), x.pos("L0.fwd.mlp.norm.s1"));
  EXPECT_LT(x.pos("L1.fwd.attn.ar.s0"), x.pos("L0.fwd.mlp.add.s1"));
  EXPECT_LT(x.pos("L0.fwd.mlp.add.s1"), x.pos("L1.fwd.attn.norm.s1"));
  EXPECT_EQ(x.op("L0.fwd.attn.add.s1").deps, std::vector<int32_t>{x.pos("L0.fwd.attn.ar.s1")});
  // Nothing crosses into the head.
  EXPECT_LT(x.pos("L2.fwd.mlp.add.s1"), x.pos("head.fwd.norm"));
  // Backward: slices in reverse; the input-gradient AllReduce runs behind the weight gradient.
  EXPECT_LT(x.pos("L2.bwd.mlp.fc1.wgrad.s1"), x.pos("L2.bwd.mlp.fc2.dgrad.s0"));
  EXPECT_FALSE(x.waits("L2.bwd.mlp.fc1.wgrad.s1", "L2.bwd.mlp.ar.s1"));
  EXPECT_TRUE(x.waits("L2.bwd.mlp.norm.bwd.s1", "L2.bwd.mlp.ar.s1"));
  EXPECT_LT(x.pos("L2.bwd.attn.ar.s1"), x.pos("L2.bwd.mlp.norm.bwd.s0"));
  EXPECT_LT(x.pos("L2.bwd.mlp.norm.bwd.s0"), x.pos("L2.bwd.attn.proj.dgrad.s0"));
  EXPECT_LT(x.pos("L0.bwd.attn.norm.bwd.s0"), x.pos("emb.bwd"));
}

TEST(ScheduleOverlap, NoneBlocksWhereIntraOverlaps) {
  const ModelSpec m = test::tiny_gpt();
  for (const OverlapMode mode : {OverlapMode::None, OverlapMode::Intra}) {
    const BlockPlan b{SplitDim::Batch, 2, 1, mode, true};
    const Indexed x(test::build_verified(m, make_uniform_plan(m, b, b, "custom")));
    EXPECT_EQ(x.waits("L1.fwd.attn.norm.s1", "L1.fwd.attn.ar.s0"), mode == OverlapMode::None);
    EXPECT_EQ(x.waits("L1.bwd.mlp.fc2.dgrad.s0", "L1.bwd.mlp.ar.s1"), mode == OverlapMode::None);
    // Intra never crosses a block boundary.
    EXPECT_LT(x.pos("L1.fwd.attn.add.s1"), x.pos("L1.fwd.mlp.norm.s0"));
  }
}

TEST(ScheduleOverlap, InterFallsBackWhenRowsIntersect) {
  const ModelSpec m = test::tiny_gpt();
  const BlockPlan attn{SplitDim::Sequence, 2, 1, OverlapMode::Inter, true};
  const BlockPlan mlp{SplitDim::Batch, 4, 1, OverlapMode::Inter, true};
  const Indexed x(test::build_verified(m, make_uniform_plan(m, attn, mlp, "custom")));
  // Attention's last sequence slice shares rows with the MLP's first batch slice: no crossing.
  EXPECT_LT(x.pos("L0.fwd.attn.add.s1"), x.pos("L0.fwd.mlp.norm.s0"));
  EXPECT_LT(x.pos("L0.fwd.mlp.add.s3"), x.pos("L1.fwd.attn.norm.s0"));
  // Same dimension and disjoint rows: it crosses.
  const BlockPlan b4{SplitDim::Batch, 4, 1, OverlapMode::Inter, true};
  const BlockPlan b2{SplitDim::Batch, 2, 1, OverlapMode::Inter, true};
  const Indexed y(test::build_verified(m, make_uniform_plan(m, b4, b2, "custom")));
  EXPECT_GT(y.pos("L0.fwd.attn.add.s3"), y.pos("L0.fwd.mlp.ar.s0"));
  EXPECT_GT(y.pos("L0.fwd.mlp.add.s1"), y.pos("L1.fwd.attn.ar.s0"));
}

TEST(ScheduleOverlap, ColumnChunksGiveOneAllReducePerChunk) {
  const ModelSpec m = test::tiny_llama();
  const BlockPlan b{SplitDim::Batch, 2, 4, OverlapMode::Intra, true};
  const Indexed x(test::build_verified(m, make_uniform_plan(m, b, b, "custom")));
  for (int c = 0; c < 4; ++c) {
    const std::string cs = ".c" + std::to_string(c);
    EXPECT_EQ(x.op("L0.fwd.mlp.ar.s1" + cs).out[0].cols(), m.hidden / 4);
    EXPECT_EQ(x.op("L0.fwd.attn.proj.s0" + cs).n, m.hidden / 4);
    EXPECT_EQ(x.op("L0.bwd.attn.qkv.dgrad.s0" + cs).n, m.hidden / 4);
  }
  const Op& nb = x.op("L0.bwd.mlp.norm.bwd.s0");
  EXPECT_EQ(nb.attrs.chunks, 4);
  EXPECT_EQ(nb.n_in, 7);
  EXPECT_TRUE(nb.attrs.accumulate);
  EXPECT_TRUE(nb.attrs.accumulate_params);
  EXPECT_FALSE(x.op("L0.bwd.mlp.norm.bwd.s1").attrs.accumulate_params);
  EXPECT_FALSE(x.op("L0.bwd.attn.proj.dgrad.s0.c0").attrs.accumulate);
  EXPECT_TRUE(x.op("L0.bwd.attn.proj.dgrad.s0.c1").attrs.accumulate);
}

TEST(ScheduleOverlap, SequenceSlicesPayForTheirKeys) {
  const ModelSpec m = test::tiny_llama();
  const BlockPlan seq{SplitDim::Sequence, 2, 1, OverlapMode::Inter, true};
  const Indexed x(test::build_verified(m, make_uniform_plan(m, seq, seq, "custom")));
  const Indexed whole(test::build_verified(m, make_strategy_plan("megatron-sync", m)));
  const Op& s0 = x.op("L0.fwd.attn.core.s0");
  const Op& s1 = x.op("L0.fwd.attn.core.s1");
  EXPECT_EQ(s1.in[1].s0, 0);
  EXPECT_EQ(s1.in[1].s1, m.seq_len);
  EXPECT_EQ(s0.in[1].s1, m.seq_len / 2);
  // Causal work: slice 0 holds the triangle of its S/2 queries, slice 1 the S/2 x S/2 rectangle plus its
  // triangle; together exactly the unsliced triangle (no discount for slicing along the sequence).
  const double S = double(m.seq_len);
  EXPECT_DOUBLE_EQ(s1.flops / s0.flops, (1.5 * S + 1) / (0.5 * S + 1));
  EXPECT_DOUBLE_EQ(s0.flops + s1.flops, whole.op("L0.fwd.attn.core.s0").flops);
  EXPECT_DOUBLE_EQ(x.op("L0.bwd.attn.core.bwd.s0").flops + x.op("L0.bwd.attn.core.bwd.s1").flops,
                   whole.op("L0.bwd.attn.core.bwd.s0").flops);
  // Key gradients: the last slice writes them all, the first adds its share.
  EXPECT_FALSE(x.op("L0.bwd.attn.core.bwd.s1").attrs.accumulate);
  EXPECT_TRUE(x.op("L0.bwd.attn.core.bwd.s0").attrs.accumulate);
  EXPECT_LT(x.pos("L0.bwd.attn.core.bwd.s1"), x.pos("L0.bwd.attn.core.bwd.s0"));
}

}  // namespace
}  // namespace domino
