// gemm_blocks_test.cpp: which GEMMs a backend runs as one product per batch entry (rows that slice the
// sequence of several batch entries), the shape of one such product, and its cost: the cost model times the
// block's shape once per block (a measured row of that shape), never the whole shape's row.
#include "sim/ir/gemm_blocks.hpp"

#include <gtest/gtest.h>

#include "sim/base/error.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/model/model_spec.hpp"
#include "sim/model/plan.hpp"
#include "toy_schedule.hpp"

namespace domino {
namespace {

Schedule uniform(const ModelSpec& m, SplitDim dim, int p, int q) {
  const BlockPlan b{dim, p, q, OverlapMode::None, false};
  return build_schedule(m, make_uniform_plan(m, b, b, "custom"));
}

TEST(GemmBlocks, SequenceSlicesOfSeveralBatchEntriesRunOneProductPerEntry) {
  const ModelSpec m = default_model();
  ASSERT_GT(m.micro_batch, 1);
  const Schedule s = uniform(m, SplitDim::Sequence, 2, 2);
  int blocked = 0;
  for (const Op& op : s.ops) {
    if (op.kind != OpKind::Gemm) {
      EXPECT_EQ(op.attrs.row_blocks, 1) << op_id(op);
      continue;
    }
    // A GEMM reading part of the sequence of every entry runs one product per entry; whole rows, one.
    const Region& rows = op.in[0];
    const bool partial = rows.b1 - rows.b0 > 1 && rows.s1 - rows.s0 < s.buffers[size_t(rows.buffer)].seq;
    if (partial) {
      EXPECT_EQ(op.attrs.row_blocks, m.micro_batch) << op_id(op);
    }
    if (op.attrs.row_blocks > 1) {
      ++blocked;
      EXPECT_GE(op.slice, 0) << op_id(op) << ": only sliced layers cut the sequence";
    }
  }
  EXPECT_GT(blocked, 0);
  // Batch slices and unsliced plans keep every entry's whole sequence: one product.
  for (const Schedule& whole : {uniform(m, SplitDim::Batch, 2, 2), uniform(m, SplitDim::Sequence, 1, 2)})
    for (const Op& op : whole.ops) EXPECT_EQ(op.attrs.row_blocks, 1) << op_id(op);
}

TEST(GemmBlocks, OneBlockHasOneEntrysRowsAndItsShareOfTheWork) {
  const ModelSpec m = default_model();
  const Schedule s = uniform(m, SplitDim::Sequence, 2, 1);
  int checked[3] = {};
  for (const Op& op : s.ops) {
    if (op.kind != OpKind::Gemm || op.attrs.row_blocks <= 1) continue;
    const Op b = gemm_block(op);
    const int64_t blocks = op.attrs.row_blocks;
    EXPECT_EQ(b.attrs.row_blocks, 1);
    EXPECT_DOUBLE_EQ(b.flops * double(blocks), op.flops);
    const bool wgrad = op.code == OpCode::MatMulWgrad;
    EXPECT_EQ(wgrad ? b.k * blocks : b.m * blocks, wgrad ? op.k : op.m) << op_id(op);
    EXPECT_EQ(wgrad ? b.m : b.k, wgrad ? op.m : op.k);
    EXPECT_EQ(b.n, op.n);
    // The row operands now hold one entry's rows, as many as the block's rows; weights are untouched.
    EXPECT_EQ(b.in[0].rows(), wgrad ? b.k : b.m) << op_id(op);
    EXPECT_EQ(b.in[0].b1 - b.in[0].b0, 1);
    if (wgrad) {
      EXPECT_EQ(b.out[0], op.out[0]);  // the weight gradient
    } else {
      EXPECT_EQ(b.out[0].rows(), b.m) << op_id(op);
      EXPECT_EQ(b.in[1], op.in[1]);  // the weight
    }
    ++checked[op.code == OpCode::MatMul ? 0 : op.code == OpCode::MatMulDgrad ? 1 : 2];
  }
  for (int c : checked) EXPECT_GT(c, 0);
  // A GEMM of one product is its own block; rows that do not split into the blocks are refused.
  Op whole;
  whole.kind = OpKind::Gemm;
  whole.code = OpCode::MatMul;
  whole.m = 96, whole.n = 8, whole.k = 8;
  EXPECT_EQ(gemm_block(whole).m, 96);
  whole.attrs.row_blocks = 5;
  whole.in[0] = Region{0, 0, 5, 0, 19, 0, 8};
  EXPECT_THROW(gemm_block(whole), Error);
}

TEST(GemmBlocks, TheCostModelTimesTheBlockShapeOncePerBlock) {
  Op op;
  op.kind = OpKind::Gemm;
  op.dtype = DType::FP32;
  op.m = 256, op.n = 384, op.k = 128;
  op.flops = 2.0 * 256 * 384 * 128;
  op.in[0] = Region{0, 0, 8, 0, 32, 0, 128};  // 8 entries x 32 of their sequence rows
  op.out[0] = Region{1, 0, 8, 0, 32, 0, 384};
  const GemmTranspose none{}, wgrad_pair{true, false};
  const CostModel cm(test::fp32_table_profile({{32, 384, 128, 90, none},
                                               {128, 384, 32, 60, wgrad_pair},
                                               {128, 384, 256, 700, wgrad_pair},
                                               {256, 384, 128, 500, none}}));
  op.code = OpCode::MatMul;
  EXPECT_DOUBLE_EQ(cm.op_us(op, 2, 1), 500);  // one product
  op.attrs.row_blocks = 8;
  EXPECT_DOUBLE_EQ(cm.op_us(op, 2, 1), 8 * 90);
  // A weight gradient: k is the rows.
  op.code = OpCode::MatMulWgrad;
  op.m = 128, op.n = 384, op.k = 256;
  op.in[1] = op.out[0];
  op.out[0] = Region{2, 0, 1, 0, 128, 0, 384};
  op.attrs.row_blocks = 1;
  EXPECT_DOUBLE_EQ(cm.op_us(op, 2, 1), 700);
  op.attrs.row_blocks = 8;
  EXPECT_DOUBLE_EQ(cm.op_us(op, 2, 1), 8 * 60);
}

// A table row of the op's block count times the whole op (its products share an operand the first leaves in
// cache, so it is not `blocks` lone products); it times nothing else: not a single product of its shape,
// nor a neighbour shape, nor an op of another block count, which keep the single products' rows.
TEST(GemmBlocks, AWholeOpRowTimesTheOpOfItsBlockCountAndNothingElse) {
  const GemmTranspose none{};
  const CostModel cm(test::fp32_table_profile(
      {{32, 384, 128, 90, none}, {32, 384, 128, 600, none, 8}, {256, 384, 128, 500, none}}));
  Op op;
  op.kind = OpKind::Gemm;
  op.code = OpCode::MatMul;
  op.dtype = DType::FP32;
  op.m = 256, op.n = 384, op.k = 128;
  op.flops = 2.0 * 256 * 384 * 128;
  op.in[0] = Region{0, 0, 8, 0, 32, 0, 128};
  op.out[0] = Region{1, 0, 8, 0, 32, 0, 384};
  op.attrs.row_blocks = 8;
  EXPECT_DOUBLE_EQ(cm.op_us(op, 2, 1), 600);
  EXPECT_DOUBLE_EQ(cm.op_us(gemm_block(op), 2, 1), 90);  // one product of the block's shape
  // 40 rows: the 32-row product's throughput alone (the whole op's row is no neighbour).
  EXPECT_DOUBLE_EQ(cm.gemm_us(DType::FP32, 40, 384, 128, 2.0 * 40 * 384 * 128, 0), 90.0 * 40 / 32);
  // The same block shape in 4 blocks (4 entries of 32 rows): no row of 4, one product per block.
  op.m = 128;
  op.flops = 2.0 * 128 * 384 * 128;
  op.in[0].b1 = op.out[0].b1 = 4;
  op.attrs.row_blocks = 4;
  EXPECT_DOUBLE_EQ(cm.op_us(op, 2, 1), 4 * 90);
  // Another transpose pair of the shape: its own rows only.
  op.code = OpCode::MatMulDgrad;
  op.attrs.row_blocks = 8;
  op.m = 256;
  op.in[0].b1 = op.out[0].b1 = 8;
  EXPECT_NE(cm.op_us(op, 2, 1), 600);
}

// On a GPU profile a forward product runs its blocks as one strided batch: every block's tiles share the
// waves (blocks of 130 rows each pad a second row of tiles: 8 x 2 x 11 = 176 tiles, two waves on 132 SMs,
// where the whole 1040 rows need 9 x 11 = 99, one wave). A weight gradient runs one product per block.
TEST(GemmBlocks, OnAGpuTheBlocksShareTheWavesOfOneBatchOrRunOneProductEach) {
  Profile p = test::unit_bytes_profile();
  p.gemm[static_cast<int>(DType::BF16)]->peak_tflops = 132;
  p.gpu = GpuProfile{132, 128, 128, 1.0, 0.0, 0.5, 128, 16, 1000, 1.0};
  const CostModel cm(p);
  Op op;
  op.kind = OpKind::Gemm;
  op.code = OpCode::MatMul;
  op.dtype = DType::BF16;
  op.m = 8 * 130, op.n = 11 * 128, op.k = 1024;
  op.flops = 2.0 * double(op.m) * double(op.n) * double(op.k);
  op.in[0] = Region{0, 0, 8, 0, 130, 0, 1024};
  const double whole = cm.op_us(op, 2, 1);
  op.attrs.row_blocks = 8;
  EXPECT_EQ(cm.op_tiles(op), 176);
  const double launch = cm.memory_us(0.0);
  EXPECT_NEAR(cm.op_us(op, 2, 1) - launch, 2 * (whole - launch), 1e-9);
  EXPECT_NEAR(cm.op_us(gemm_block(op), 2, 1), whole, 1e-9);  // one block: 22 tiles, one wave
  // Beside a collective holding 66 SMs: 176 tiles in three waves of 66.
  EXPECT_NEAR(cm.gemm_us_on_sms(op, 66) - launch, 3 * (whole - launch), 1e-9);
  op.code = OpCode::MatMulWgrad;
  op.m = 1024, op.k = 8 * 130;
  op.in[1] = Region{1, 0, 8, 0, 130, 0, 11 * 128};
  EXPECT_NEAR(cm.op_us(op, 2, 1), 8 * cm.op_us(gemm_block(op), 2, 1), 1e-9);
  EXPECT_EQ(cm.op_tiles(op), cm.op_tiles(gemm_block(op)));
}

}  // namespace
}  // namespace domino
