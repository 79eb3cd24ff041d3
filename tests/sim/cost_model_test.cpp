// cost_model_test.cpp: op durations against figures derived by hand from a small profile built in code
// (roofline, log-interpolated efficiency, measured GEMM table, ring AllReduce with scope selection; on GPU
// profiles the tile/wave model: wave quantization on fewer SMs, the dgrad/wgrad transpose factor, skinny
// versus square GEMMs of equal FLOPs, the shipped profiles' large-GEMM efficiency).
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

// toy_profile with a gpu section and without launch: 132 SMs at 1e6 FLOP/us each (peak 132 TFLOP/s),
// 128x128 tiles without fixed cost: a tile of k = 1024 takes kTileUs.
Profile gpu_profile(double transpose_efficiency = 0.8) {
  Profile p = toy_profile();
  p.gemm[static_cast<int>(DType::BF16)]->peak_tflops = 132;
  p.memory.launch_overhead_us = 0;
  p.interference = {};
  p.gpu = GpuProfile{132, 128, 128, 1.0, 0.0, transpose_efficiency, 128, 16, 1000, 2};
  return p;
}
constexpr double kTileUs = 2.0 * 128 * 128 * 1024 / 1e6;

Profile shipped(const char* name) {
  return load_profile((std::filesystem::path(DOMINO_SOURCE_DIR) / "profiles" / name).string());
}

Op gemm_op(int64_t m, int64_t n, int64_t k, OpCode code = OpCode::MatMul) {
  Op op;
  op.kind = OpKind::Gemm;
  op.code = code;
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

// An op on the first of a row block's q column chunks pays its opcode's (else its kind's) per-row term on the
// m rows of each of the q; a later chunk pays its bytes alone (the first chunk's runs fetched on into its
// part of the rows), and so do whole rows and an opcode without the term.
TEST(CostModel, AMemoryBoundOpOnTheFirstColumnChunkPaysPerRowOfEveryChunk) {
  Profile p = toy_profile();
  p.memory.per_code["ResidualAdd"] = {500, 7, 0.04};
  p.memory.per_kind["norm"] = {500, 7, 0.5};
  const CostModel cm(p);
  Op add;
  add.kind = OpKind::Elementwise;
  add.code = OpCode::ResidualAdd;
  add.bytes = 3e6;
  add.m = 1000;
  EXPECT_NEAR(cm.op_us(add, 8, 8), 7 + 6, 1e-9);  // chunk -1: whole rows
  add.chunk = 0;
  EXPECT_NEAR(cm.op_us(add, 8, 8), 7 + 6 + 1000 * 0.04, 1e-9);  // attrs.chunks 1: its own rows
  add.attrs.chunks = 4;
  EXPECT_NEAR(cm.op_us(add, 8, 8), 7 + 6 + 4 * 1000 * 0.04, 1e-9);
  for (int8_t later : {1, 3}) {
    Op next = add;
    next.chunk = later;
    EXPECT_NEAR(cm.op_us(next, 8, 8), 7 + 6, 1e-9) << "chunk " << int(later);
  }
  add.attrs.chunks = 1;
  Op norm = add;
  norm.kind = OpKind::Norm;
  norm.code = OpCode::LayerNormFwd;
  EXPECT_NEAR(cm.op_us(norm, 8, 8), 7 + 6 + 1000 * 0.5, 1e-9);  // the kind's term
  Op rope = add;
  rope.code = OpCode::RopeFwd;
  EXPECT_NEAR(cm.op_us(rope, 8, 8), 2 + 3, 1e-9);  // neither an opcode nor a kind term: the general figures
}

// Bytes a collective has just copied out (Op::fresh_bytes) run at the opcode's cached bandwidth where that
// collective's output fits the profile's cache; otherwise, and without a cached bandwidth, at the cold one.
TEST(CostModel, FreshBytesRunAtTheCachedBandwidthWhereTheirSourceFitsTheCache) {
  Profile p = toy_profile();
  p.memory.per_code["ResidualAdd"] = {500, 7, 0, 2000};
  p.memory.cache_bytes = 1e6;
  Op add;
  add.kind = OpKind::Elementwise;
  add.code = OpCode::ResidualAdd;
  add.bytes = 3e6;
  add.fresh_bytes = 2e6;
  add.fresh_from_bytes = 1e6;
  EXPECT_NEAR(CostModel(p).op_us(add, 8, 8), 7 + 2 + 1, 1e-9);  // 1 MB cold at 500 GB/s, 2 MB at 2000
  add.fresh_from_bytes = 1e6 + 1;
  EXPECT_NEAR(CostModel(p).op_us(add, 8, 8), 7 + 6, 1e-9);  // the source does not fit
  add.fresh_from_bytes = 1e6;
  Op norm = add;
  norm.kind = OpKind::Norm;
  norm.code = OpCode::LayerNormFwd;
  EXPECT_NEAR(CostModel(p).op_us(norm, 8, 8), 2 + 3, 1e-9);  // no cached bandwidth: cold
  p.memory.cache_bytes = 0;
  EXPECT_NEAR(CostModel(p).op_us(add, 8, 8), 7 + 6, 1e-9);  // no cache term: cold
}

// A row block's later column chunk streams at the opcode's later-chunk bandwidth; its first chunk pays the
// rows of every chunk at the cold one; without the term a later chunk is a whole-row op of its bytes.
TEST(CostModel, ALaterColumnChunkRunsAtItsOwnBandwidth) {
  Profile p = toy_profile();
  p.memory.per_code["ResidualAdd"] = {500, 7, 0.01, 0, 1000};
  Op add;
  add.kind = OpKind::Elementwise;
  add.code = OpCode::ResidualAdd;
  add.bytes = 2e6;
  add.m = 100;
  add.attrs.chunks = 2;
  add.chunk = 1;
  EXPECT_NEAR(CostModel(p).op_us(add, 8, 8), 7 + 2, 1e-9);  // 2 MB at 1000 GB/s, no rows
  add.chunk = 0;
  EXPECT_NEAR(CostModel(p).op_us(add, 8, 8), 7 + 4 + 2, 1e-9);  // 2 MB at 500 GB/s, 200 rows at 0.01 us
  add.chunk = -1;
  EXPECT_NEAR(CostModel(p).op_us(add, 8, 8), 7 + 4, 1e-9);  // whole rows
  add.chunk = 1;
  add.fresh_bytes = 1e6;  // a later chunk's rows a collective has just written: the cached term wins for them
  p.memory.per_code["ResidualAdd"].cached_bandwidth_gbps = 2000;
  p.memory.cache_bytes = 1e7;
  add.fresh_from_bytes = 1e6;
  EXPECT_NEAR(CostModel(p).op_us(add, 8, 8), 7 + 1 + 0.5, 1e-9);
  p.memory.per_code["ResidualAdd"] = {500, 7, 0.01};
  add.fresh_bytes = 0;
  EXPECT_NEAR(CostModel(p).op_us(add, 8, 8), 7 + 4, 1e-9);  // no term: the cold bandwidth
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

// An opcode with figures of its own adds its FLOP and byte terms (not the larger of them); the other opcode
// keeps the curve; a rate of 0 drops its term.
TEST(CostModel, AttentionPerCodeAddsItsFlopAndByteTerms) {
  Profile p = toy_profile();
  p.attention.per_code["AttnFwd"] = {5, 20, 2};  // 20 GFLOP/s = 2e4 FLOP/us, 2 GB/s = 2e3 B/us
  const CostModel cm(p);
  Op fwd;
  fwd.kind = OpKind::Attention;
  fwd.code = OpCode::AttnFwd;
  fwd.flops = 4e6;
  fwd.bytes = 1e6;
  EXPECT_NEAR(cm.op_us(fwd, 8, 8), 5 + 4e6 / 2e4 + 1e6 / 2e3, 1e-9);
  Op bwd = fwd;
  bwd.code = OpCode::AttnBwd;
  EXPECT_NEAR(cm.op_us(bwd, 8, 8), CostModel(toy_profile()).op_us(bwd, 8, 8), 1e-12);
  p.attention.per_code["AttnFwd"].bandwidth_gbps = 0;
  EXPECT_NEAR(CostModel(p).op_us(fwd, 8, 8), 5 + 4e6 / 2e4, 1e-9);
}

Op allreduce_op(double bytes) {
  Op ar;
  ar.kind = OpKind::AllReduce;
  ar.code = OpCode::AllReduce;
  ar.stream = Stream::Comm;
  ar.bytes = bytes;
  return ar;
}

TEST(CostModel, RingAllReduceInsideAndAcrossNodes) {
  const CostModel cm(toy_profile());
  const Op ar = allreduce_op(1e8);
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
  const CostModel cm(shipped("dgx-h100.yaml"));
  // Non-decreasing, and strictly increasing once a doubling adds waves: up to m = 1024 the 128x256 tiles
  // (at most 8 x 16) fit in one wave of 132 SMs and cost the same (the profile's gpu tile model).
  double prev = 0;
  for (int64_t m = 64; m <= 65536; m *= 2) {
    const double t = cm.op_us(gemm_op(m, 4096, 4096), 8, 8);
    if (m > 1024) {
      EXPECT_GT(t, prev) << m;
    } else {
      EXPECT_GE(t, prev) << m;
    }
    prev = t;
  }
  // A 4096^3 bf16 GEMM (137 GFLOP) at ~0.8 of 989 TFLOP/s: about 174 us.
  EXPECT_NEAR(cm.op_us(gemm_op(4096, 4096, 4096), 8, 8), 174, 5);
}

// GPU profiles: the GEMM tile/wave model, on shapes whose tile and wave counts are worked out by hand.
TEST(GemmTileModel, OneWaveAloneTwoWavesBesideACollective) {
  const CostModel cm(gpu_profile());
  const Op op = gemm_op(12 * 128, 11 * 128, 1024);  // 132 tiles
  EXPECT_EQ(cm.op_tiles(op), 132);
  EXPECT_NEAR(cm.op_us(op, 8, 8), kTileUs, 1e-9);
  EXPECT_NEAR(cm.gemm_us_on_sms(op, 132), kTileUs, 1e-9);
  // 16 SMs held by a collective: 132 tiles on 116 SMs take a second, nearly empty wave.
  EXPECT_NEAR(cm.gemm_us_on_sms(op, 132 - 16), 2 * kTileUs, 1e-9);
  // A GEMM that fits in the SMs left keeps its time.
  const Op small = gemm_op(10 * 128, 11 * 128, 1024);  // 110 tiles
  EXPECT_NEAR(cm.gemm_us_on_sms(small, 116), cm.op_us(small, 8, 8), 1e-9);
}

// With other tiles listed, a GEMM runs with the tile fastest on every SM: 133 tiles of 128x128 would take
// two waves, 266 tiles of 64x128 (half the k loop each) take three half waves (1.5 tile times). The tile is
// chosen by shape: beside a collective the GEMM keeps it.
TEST(GemmTileModel, TheFastestListedTileRunsAndKeepsRunningBesideACollective) {
  Profile p = gpu_profile();
  const Op op = gemm_op(7 * 128, 19 * 128, 1024);  // 133 tiles of 128x128
  const double one_tile = CostModel(p).op_us(op, 8, 8);
  EXPECT_NEAR(one_tile, 2 * kTileUs, 1e-9);
  p.gpu->other_tiles = {{64, 128}};
  const CostModel cm(p);
  EXPECT_EQ(cm.op_tiles(op), 266);
  EXPECT_NEAR(cm.op_us(op, 8, 8), 1.5 * kTileUs, 1e-9);
  // 266 half tiles on 116 SMs: 3 waves, still the smaller tile (128x128 would have needed 2 full waves).
  EXPECT_NEAR(cm.gemm_us_on_sms(op, 116), 1.5 * kTileUs, 1e-9);
  // A shape the first tile fills exactly keeps it (ties go to the first listed).
  EXPECT_EQ(cm.op_tiles(gemm_op(12 * 128, 11 * 128, 1024)), 132);
}

TEST(GemmTileModel, EdgeTilesComputePadding) {
  const CostModel cm(gpu_profile());
  // 129 rows need two tile rows: the same time as 256 rows.
  EXPECT_EQ(cm.op_tiles(gemm_op(129, 128, 1024)), 2);
  EXPECT_NEAR(cm.op_us(gemm_op(129, 128, 1024), 8, 8), cm.op_us(gemm_op(256, 128, 1024), 8, 8), 1e-9);
}

TEST(GemmTileModel, DgradAndWgradRunAtTheTransposeFactor) {
  const CostModel cm(gpu_profile(0.8));
  const double forward = cm.op_us(gemm_op(4096, 4096, 1024), 8, 8);
  EXPECT_NEAR(cm.op_us(gemm_op(4096, 4096, 1024, OpCode::MatMulDgrad), 8, 8), forward / 0.8, 1e-9);
  EXPECT_NEAR(cm.op_us(gemm_op(4096, 4096, 1024, OpCode::MatMulWgrad), 8, 8), forward / 0.8, 1e-9);
  // Without a gpu section the three cost the same (the FLOP-indexed curve).
  Profile flat = gpu_profile();
  flat.gpu.reset();
  const CostModel old(flat);
  EXPECT_DOUBLE_EQ(old.op_us(gemm_op(4096, 4096, 1024, OpCode::MatMulDgrad), 8, 8),
                   old.op_us(gemm_op(4096, 4096, 1024), 8, 8));
}

TEST(GemmTileModel, SkinnyGemmsAreSlowerThanSquareOnesOfTheSameFlops) {
  const CostModel cm(shipped("dgx-h100.yaml"));
  const Op square = gemm_op(4096, 4096, 4096);
  const Op short_k = gemm_op(16384, 16384, 256);  // a TP slice's short reduction: the fixed tile cost dominates
  const Op narrow = gemm_op(262144, 128, 2048);   // 128 columns in 256-wide tiles: half of each is padding
  ASSERT_DOUBLE_EQ(square.flops, short_k.flops);
  ASSERT_DOUBLE_EQ(square.flops, narrow.flops);
  EXPECT_GT(cm.op_us(short_k, 8, 8), 1.2 * cm.op_us(square, 8, 8));
  EXPECT_GT(cm.op_us(narrow, 8, 8), 1.5 * cm.op_us(square, 8, 8));
}

TEST(GemmTileModel, ShippedProfilesReachTheMeasuredLargeGemmEfficiency) {
  // facts: H100 SXM large GEMMs 780-795 of 989 TFLOP/s; A100 SXM 271 of 312 TFLOP/s.
  const Op big = gemm_op(8192, 8192, 8192);
  for (const char* name : {"dgx-h100.yaml", "h100-multinode.yaml"}) {
    const double eff = big.flops / (989e6 * CostModel(shipped(name)).op_us(big, 8, 8));
    EXPECT_GT(eff, 0.78) << name;
    EXPECT_LT(eff, 0.81) << name;
  }
  const double a100 = big.flops / (312e6 * CostModel(shipped("dgx-a100.yaml")).op_us(big, 8, 8));
  EXPECT_GT(a100, 0.85);
  EXPECT_LT(a100, 0.89);
}

TEST(GemmTileModel, MeasuredTableWinsAndIsRescaledByWaves) {
  Profile p = gpu_profile();
  p.gemm[static_cast<int>(DType::BF16)]->table = {{12 * 128, 11 * 128, 1024, 50.0}};
  const CostModel cm(p);
  const Op op = gemm_op(12 * 128, 11 * 128, 1024);
  EXPECT_DOUBLE_EQ(cm.op_us(op, 8, 8), 50.0);
  EXPECT_DOUBLE_EQ(cm.gemm_us_on_sms(op, 116), 100.0);  // 2 waves instead of 1
}

TEST(GemmTileModel, AttentionLosesWavesBesideACollective) {
  const CostModel cm(gpu_profile());
  Op attn;
  attn.kind = OpKind::Attention;
  attn.code = OpCode::AttnFwd;
  attn.m = 33 * 128;  // 33 query blocks x 4 heads = 132 tiles
  attn.attrs.heads = 4;
  attn.flops = 1e9;
  attn.bytes = 1e6;
  EXPECT_EQ(cm.op_tiles(attn), 132);
  EXPECT_NEAR(cm.gemm_us_on_sms(attn, 116), 2 * cm.op_us(attn, 8, 8), 1e-9);
  // With its query region: blocks of rows never span two sequences. 3 sequences of 129 rows: 2 blocks each,
  // not ceil(387 / 128) = 4.
  attn.m = 3 * 129;
  attn.in[0] = Region{0, 0, 3, 0, 129, 0, 64};
  attn.n_in = 1;
  EXPECT_EQ(cm.op_tiles(attn), 3 * 2 * 4);
}

TEST(GemmTileModel, CollectiveFiguresComeFromTheGpuSection) {
  const CostModel cm(gpu_profile());
  const Op ar = allreduce_op(1e6);
  EXPECT_EQ(cm.collective_sms(ar, 8, 8), 16);
  EXPECT_DOUBLE_EQ(cm.collective_hbm_bytes(ar, 8), 2 * 1e6 * 2 * 7 / 8);  // 2 HBM bytes per ring byte
}

}  // namespace
}  // namespace domino
