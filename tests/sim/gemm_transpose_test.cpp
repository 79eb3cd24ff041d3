// gemm_transpose_test.cpp: the GEMM table keyed by transpose pair (a transposed GEMM takes its own pair's
// row and never another pair's; 4-column rows time every pair, so an old profile predicts as before; every
// row form loads, saves and loads back) and per-opcode memory figures (an opcode's own figures win over its
// kind's, the other opcodes of the kind keep the kind's).
#include <gtest/gtest.h>

#include <filesystem>

#include "sim/base/error.hpp"
#include "sim/cost/cost_model.hpp"
#include "toy_schedule.hpp"

namespace domino {
namespace {

Op gemm(int64_t m, int64_t n, int64_t k, OpCode code) {
  Op op;
  op.kind = OpKind::Gemm;
  op.code = code;
  op.m = m, op.n = n, op.k = k;
  op.flops = 2.0 * double(m * n * k);
  op.bytes = 4.0 * double(m * k + k * n + m * n);
  op.dtype = DType::FP32;
  return op;
}

constexpr GemmTranspose kNone{}, kDgrad{false, true}, kWgrad{true, false};

TEST(GemmTranspose, OpcodesMapToTheOperandsTheExecutorTransposes) {
  EXPECT_EQ(gemm_transpose(OpCode::MatMul), kNone);
  EXPECT_EQ(gemm_transpose(OpCode::MatMulDgrad), kDgrad);  // A · B^T
  EXPECT_EQ(gemm_transpose(OpCode::MatMulWgrad), kWgrad);  // A^T · B
}

TEST(GemmTranspose, EachPairTakesItsOwnRowOfTheShape) {
  const CostModel cm(test::fp32_table_profile(
      {{256, 256, 256, 100, kNone}, {256, 256, 256, 200, kDgrad}, {256, 256, 256, 300, kWgrad}}));
  EXPECT_DOUBLE_EQ(cm.op_us(gemm(256, 256, 256, OpCode::MatMul), 2, 4), 100);
  EXPECT_DOUBLE_EQ(cm.op_us(gemm(256, 256, 256, OpCode::MatMulDgrad), 2, 4), 200);
  EXPECT_DOUBLE_EQ(cm.op_us(gemm(256, 256, 256, OpCode::MatMulWgrad), 2, 4), 300);
}

TEST(GemmTranspose, AnotherPairsRowIsNeverUsedNorInterpolated) {
  // Only a wgrad row: a forward GEMM of that very shape falls back to the roofline, not to it.
  const CostModel cm(test::fp32_table_profile({{256, 256, 256, 300, kWgrad}}));
  const Op fwd = gemm(256, 256, 256, OpCode::MatMul);
  const double roofline = fwd.flops / (1e6 * 0.5);
  EXPECT_DOUBLE_EQ(cm.op_us(fwd, 2, 4), roofline);
  EXPECT_DOUBLE_EQ(cm.op_us(gemm(256, 256, 256, OpCode::MatMulWgrad), 2, 4), 300);
  // A neighbour shape interpolates among rows of its own pair only.
  const Op near_wgrad = gemm(256, 256, 512, OpCode::MatMulWgrad);
  EXPECT_DOUBLE_EQ(cm.op_us(near_wgrad, 2, 4), near_wgrad.flops / (2.0 * 256 * 256 * 256 / 300));
  EXPECT_DOUBLE_EQ(cm.op_us(gemm(256, 256, 512, OpCode::MatMul), 2, 4), 2 * roofline);
}

TEST(GemmTranspose, AFourColumnRowTimesEveryPairUnlessThePairHasItsOwn) {
  const CostModel cm(test::fp32_table_profile({{256, 256, 256, 100}, {256, 256, 256, 250, kDgrad}}));
  EXPECT_DOUBLE_EQ(cm.op_us(gemm(256, 256, 256, OpCode::MatMul), 2, 4), 100);
  EXPECT_DOUBLE_EQ(cm.op_us(gemm(256, 256, 256, OpCode::MatMulWgrad), 2, 4), 100);
  EXPECT_DOUBLE_EQ(cm.op_us(gemm(256, 256, 256, OpCode::MatMulDgrad), 2, 4), 250);
}

TEST(GemmTranspose, AnOldProfilePredictsEveryOpcodeAsTheForwardGemm) {
  // Four-column rows only: dgrad and wgrad cost what the forward GEMM of their shape costs, exact rows
  // and interpolated ones alike (what the cost model gave before transposes existed).
  const CostModel cm(
      test::fp32_table_profile({{128, 128, 128, 10}, {128, 128, 512, 30}, {512, 128, 128, 35}}));
  for (const auto& [m, n, k] : {std::tuple{128, 128, 128}, {128, 128, 256}, {256, 128, 256}, {2048, 2048, 2048}}) {
    const double fwd = cm.op_us(gemm(m, n, k, OpCode::MatMul), 2, 4);
    EXPECT_DOUBLE_EQ(cm.op_us(gemm(m, n, k, OpCode::MatMulDgrad), 2, 4), fwd);
    EXPECT_DOUBLE_EQ(cm.op_us(gemm(m, n, k, OpCode::MatMulWgrad), 2, 4), fwd);
  }
}

TEST(GemmTranspose, EveryRowFormLoadsAndSavesBack) {
  const std::string yaml = R"(name: mixed
devices_per_node: 4
gemm:
  fp32:
    peak_tflops: 1
    efficiency: [[1, 0.5]]
    table:
      - [64, 64, 64, 5]
      - [64, 64, 64, 0, 1, 6]
      - [64, 64, 64, 1, 0, 7]
      - [64, 64, 64, 1, 0, 4, 20]
memory: {bandwidth_gbps: 100, launch_overhead_us: 0}
attention: {relative_efficiency: 0.5}
collectives: {intra_node: {latency_us: 10, bus_bandwidth_gbps: 1}}
interference: {compute_slowdown_during_comm: 0, comm_slowdown_during_compute: 0}
)";
  const Profile p = load_profile_string(yaml, "mixed.yaml");
  const auto& t = p.gemm[static_cast<int>(DType::FP32)]->table;
  ASSERT_EQ(t.size(), 4u);
  EXPECT_FALSE(t[0].transpose.has_value());
  EXPECT_EQ(t[1].transpose, kDgrad);
  EXPECT_EQ(t[2].transpose, kWgrad);
  EXPECT_EQ(t[2].blocks, 1);
  EXPECT_EQ(t[3].transpose, kWgrad);  // a whole op of 4 products
  EXPECT_EQ(t[3].blocks, 4);
  const Profile back = load_profile_string(profile_to_yaml(p), "back.yaml");
  const auto& b = back.gemm[static_cast<int>(DType::FP32)]->table;
  ASSERT_EQ(b.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(b[i].transpose, t[i].transpose);
    EXPECT_EQ(b[i].blocks, t[i].blocks);
    EXPECT_EQ(b[i].time_us, t[i].time_us);
  }
}

TEST(GemmTranspose, ValidationRejectsADuplicatePair) {
  EXPECT_THROW(CostModel(test::fp32_table_profile({{64, 64, 64, 5, kDgrad}, {64, 64, 64, 6, kDgrad}})),
               Error);
  EXPECT_THROW(CostModel(test::fp32_table_profile({{64, 64, 64, 5, kDgrad}, {64, 64, 64, 6}})),
               Error);  // 4-column first
  // A whole op of several products names its transpose pair.
  EXPECT_THROW(CostModel(test::fp32_table_profile({{64, 64, 64, 5, std::nullopt, 4}})), Error);
}

TEST(MemoryPerCode, AnOpcodesOwnFiguresWinOverItsKinds) {
  Profile p = test::fp32_table_profile({});
  p.memory.per_kind["norm"] = {50, 1};
  p.memory.per_code["LayerNormFwd"] = {200, 3};
  const CostModel cm(p);
  Op fwd;
  fwd.kind = OpKind::Norm;
  fwd.code = OpCode::LayerNormFwd;
  fwd.bytes = 2e6;
  EXPECT_NEAR(cm.op_us(fwd, 2, 4), 3 + 2e6 / 200e3, 1e-9);
  Op bwd = fwd;
  bwd.code = OpCode::LayerNormBwd;
  EXPECT_NEAR(cm.op_us(bwd, 2, 4), 1 + 2e6 / 50e3, 1e-9);  // the kind's figures
  p.memory.per_code["MatMul"] = {200, 3};                  // not an opcode of a memory-bound kind
  EXPECT_THROW(CostModel{p}, Error);
}

}  // namespace
}  // namespace domino
