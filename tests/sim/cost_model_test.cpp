// cost_model_test.cpp: op durations against figures derived by hand from a small profile built in code
// (roofline, log-interpolated efficiency, measured GEMM table, ring AllReduce with scope selection).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "sim/cost/cost_model.hpp"
#include "sim/base/error.hpp"

namespace domino {
namespace {

// peak 100 TFLOP/s = 1e8 FLOP/us; memory 1000 GB/s = 1e6 B/us; launch 2 us.
Profile toy_profile() {
  Profile p;
  p.name = "toy";
  p.devices_per_node = 8;
  GemmProfile g;
  g.peak_tflops = 100;
  g.efficiency = {{1, 0.5}, {100, 0.8}};
  p.gemm[static_cast<int>(DType::BF16)] = g;
  p.memory = {1000, 2, {}};
  p.attention.relative_efficiency = 0.5;
  p.intra_node = {10, 100, {}, 0};
  p.inter_node = CollectiveProfile{20, 50, {}, 0};
  p.interference = {0.15, 0.05};
  return p;
}

Op gemm_op(int64_t m, int64_t n, int64_t k) {
  Op op;
  op.kind = OpKind::Gemm;
  op.code = OpCode::MatMul;
  op.m = m, op.n = n, op.k = k;
  op.flops = 2.0 * m * n * k;
  op.bytes = 2.0 * (m * k + k * n + m * n);
  op.dtype = DType::BF16;
  return op;
}

TEST(CostModel, LargeGemmRunsAtTheTopOfTheCurve) {
  const CostModel cm(toy_profile());
  const double flops = 2.0 * 4096 * 4096 * 4096;  // 137 GFLOP, beyond the last point: efficiency 0.8
  EXPECT_NEAR(cm.op_us(gemm_op(4096, 4096, 4096), 8, 8), 2 + flops / (1e8 * 0.8), 1e-9);
}

TEST(CostModel, EfficiencyIsInterpolatedInLogSize) {
  const CostModel cm(toy_profile());
  EXPECT_NEAR(cm.gemm_efficiency(DType::BF16, 10e9), 0.65, 1e-12);  // log-midpoint of 1 and 100 GFLOP
  EXPECT_NEAR(cm.gemm_efficiency(DType::BF16, 0.01e9), 0.5, 1e-12);  // clamped below the first point
  EXPECT_NEAR(cm.gemm_efficiency(DType::BF16, 1e15), 0.8, 1e-12);    // clamped above the last
  EXPECT_NEAR(cm.gemm_us(DType::BF16, 0, 0, 0, 10e9, 0), 2 + 10e9 / (1e8 * 0.65), 1e-9);
}

TEST(CostModel, SkinnyGemmIsMemoryBound) {
  const CostModel cm(toy_profile());
  // 2 x 1M x 1: 4 MFLOP (0.08 us of compute) but 8 MB to read and write: 8 us at 1 TB/s.
  const double bytes = 8e6;
  EXPECT_NEAR(cm.gemm_us(DType::BF16, 2, 1 << 20, 1, 4e6, bytes), 2 + bytes / 1e6, 1e-9);
}

TEST(CostModel, MemoryBoundKindsCostBytesOverBandwidth) {
  const CostModel cm(toy_profile());
  for (OpKind k : {OpKind::Norm, OpKind::Activation, OpKind::Elementwise, OpKind::Copy, OpKind::Optimizer,
                   OpKind::Embedding, OpKind::Loss}) {
    Op op;
    op.kind = k;
    op.bytes = 3e6;
    op.flops = 1e12;  // ignored: these ops are bandwidth-bound
    EXPECT_NEAR(cm.op_us(op, 8, 8), 2 + 3, 1e-9) << to_string(k);
  }
}

TEST(CostModel, AMemoryBoundKindWithItsOwnFiguresUsesThem) {
  Profile p = toy_profile();
  p.memory.per_kind["norm"] = {500, 7};  // half the general bandwidth, more fixed cost
  const CostModel cm(p);
  Op norm;
  norm.kind = OpKind::Norm;
  norm.bytes = 3e6;
  EXPECT_NEAR(cm.op_us(norm, 8, 8), 7 + 6, 1e-9);
  Op other = norm;
  other.kind = OpKind::Optimizer;
  EXPECT_NEAR(cm.op_us(other, 8, 8), 2 + 3, 1e-9);  // the general figures
  EXPECT_NEAR(cm.memory_us(3e6), 2 + 3, 1e-9);
  p.memory.per_kind["gemm"] = {500, 7};  // not a memory-bound kind
  EXPECT_THROW(CostModel{p}, Error);
}

TEST(CostModel, AttentionRunsAtItsRelativeEfficiency) {
  const CostModel cm(toy_profile());
  Op op;
  op.kind = OpKind::Attention;
  op.flops = 200e9;
  op.bytes = 1e6;
  EXPECT_NEAR(cm.op_us(op, 8, 8), 2 + 200e9 / (1e8 * 0.5 * 0.8), 1e-9);
  Profile own = toy_profile();
  own.attention.efficiency = {{1, 0.25}};
  EXPECT_NEAR(CostModel(own).op_us(op, 8, 8), 2 + 200e9 / (1e8 * 0.25), 1e-9);
}

TEST(CostModel, RingAllReduceInsideAndAcrossNodes) {
  const CostModel cm(toy_profile());
  Op ar;
  ar.kind = OpKind::AllReduce;
  ar.stream = Stream::Comm;
  ar.bytes = 1e8;
  EXPECT_NEAR(cm.op_us(ar, 8, 8), 10 + 1e8 * 2 * 7 / 8 / 1e5, 1e-9);     // 1760 us inside a node
  EXPECT_NEAR(cm.op_us(ar, 2, 8), 10 + 1e8 * 2 * 1 / 2 / 1e5, 1e-9);     // ring factor 1 at 2 ranks
  EXPECT_NEAR(cm.op_us(ar, 16, 8), 20 + 1e8 * 2 * 15 / 16 / 5e4, 1e-9);  // spans 2 nodes: inter-node figures
  EXPECT_EQ(cm.op_us(ar, 1, 8), 0);                                      // no group, no communication
}

TEST(CostModel, AcrossNodesWithoutInterNodeFiguresIsBadInput) {
  Profile p = toy_profile();
  p.inter_node.reset();
  const CostModel cm(p);
  try {
    cm.allreduce_us(1e6, 16, 8);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find("inter_node"), std::string::npos);
  }
}

TEST(CostModel, BusBandwidthTableIsLogInterpolatedAndClamped) {
  Profile p = toy_profile();
  p.intra_node.table = {{1e6, 50}, {1e8, 100}};
  const CostModel cm(p);
  EXPECT_NEAR(cm.allreduce_us(1e7, 2, 8), 10 + 1e7 / 75e3, 1e-9);   // log-midpoint: 75 GB/s
  EXPECT_NEAR(cm.allreduce_us(1e3, 2, 8), 10 + 1e3 / 50e3, 1e-9);   // below the table: 50 GB/s
  EXPECT_NEAR(cm.allreduce_us(1e10, 2, 8), 10 + 1e10 / 100e3, 1e-6);  // above: 100 GB/s
}

TEST(CostModel, GemmTableExactMatchThenNearestThroughputThenRoofline) {
  Profile p = toy_profile();
  p.gemm[static_cast<int>(DType::BF16)]->table = {{1024, 1024, 1024, 50}, {1024, 1024, 4096, 150}};
  const CostModel cm(p);
  EXPECT_DOUBLE_EQ(cm.op_us(gemm_op(1024, 1024, 1024), 8, 8), 50);
  EXPECT_DOUBLE_EQ(cm.op_us(gemm_op(1024, 1024, 4096), 8, 8), 150);
  // k = 2048 sits halfway (in log space) between both rows: the mean of their throughputs, applied to
  // this GEMM's flops. Throughputs: 2*1024^3/50 and 2*1024^2*4096/150 FLOP/us.
  const double tp_a = 2.0 * 1024 * 1024 * 1024 / 50, tp_b = 2.0 * 1024 * 1024 * 4096 / 150;
  EXPECT_NEAR(cm.op_us(gemm_op(1024, 1024, 2048), 8, 8), 2.0 * 1024 * 1024 * 2048 / ((tp_a + tp_b) / 2), 1e-9);
  // Far from every row (factor 16 in m): the roofline.
  const Op far = gemm_op(16384, 1024, 1024);
  EXPECT_NEAR(cm.op_us(far, 8, 8), cm.gemm_us(DType::BF16, 16384, 1024, 1024, far.flops, far.bytes), 1e-12);
  const double eff = cm.gemm_efficiency(DType::BF16, far.flops);
  EXPECT_NEAR(cm.op_us(far, 8, 8), 2 + far.flops / (1e8 * eff), 1e-9);
}

TEST(CostModel, MissingDTypeIsBadInput) {
  const CostModel cm(toy_profile());
  Op op = gemm_op(64, 64, 64);
  op.dtype = DType::FP32;
  EXPECT_FALSE(cm.has_dtype(DType::FP32));
  try {
    cm.op_us(op, 2, 8);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find("gemm.fp32"), std::string::npos) << e.what();
  }
}

TEST(CostModel, InvalidProfileIsRejectedAtConstruction) {
  Profile p = toy_profile();
  p.gemm[static_cast<int>(DType::BF16)]->efficiency = {{10, 0.5}, {1, 0.8}};
  EXPECT_THROW(CostModel{p}, Error);
}

TEST(CostModel, CostDependsOnlyOnWhatTheOpComputes) {
  const CostModel cm(toy_profile());
  Op a = gemm_op(2048, 512, 1024);
  Op b = a;
  b.layer = 7, b.slice = 1, b.name = "fc2", b.phase = Phase::Backward, b.index = 99;
  EXPECT_EQ(cm.op_us(a, 8, 8), cm.op_us(b, 8, 8));
}

TEST(CostModel, ShippedH100ProfileIsMonotoneInGemmSize) {
  const CostModel cm(load_profile((std::filesystem::path(DOMINO_SOURCE_DIR) / "profiles" / "dgx-h100.yaml").string()));
  double prev = 0;
  for (int64_t m = 64; m <= 65536; m *= 2) {
    const double t = cm.op_us(gemm_op(m, 4096, 4096), 8, 8);
    EXPECT_GT(t, prev) << m;
    prev = t;
  }
  // A 4096^3 bf16 GEMM (137 GFLOP) at ~0.8 of 989 TFLOP/s: about 174 us.
  EXPECT_NEAR(cm.op_us(gemm_op(4096, 4096, 4096), 8, 8), 174, 5);
}

}  // namespace
}  // namespace domino
