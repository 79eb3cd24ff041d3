// cpu_gemm_test.cpp: MatMul / MatMulDgrad / MatMulWgrad against a naive double reference on strided column
// chunks, sequence-split row regions over several batch entries, with and without accumulation and bias.
#include <gtest/gtest.h>

#include "tests/executor/cpu_test_util.hpp"

namespace domino::cputest {
namespace {

constexpr double kAtol = 1e-5, kRtol = 1e-5;

struct GemmBed : Bed {
  int32_t x = buffer("x", 3, 8, 10);      // activations: k = 6 columns [2, 8)
  int32_t w = buffer("w", 1, 6, 15);      // weight: rows 6, output columns [5, 10)
  int32_t bias = buffer("b", 1, 1, 15);
  int32_t y = buffer("y", 3, 8, 12);      // output: columns [4, 9)
  Region xs = box(x, 0, 3, 2, 5, 2, 8);   // sequence slice over 3 batch entries: strided blocks
  Region ws = box(w, 0, 1, 0, 6, 5, 10);
  Region bs = box(bias, 0, 1, 0, 1, 5, 10);
  Region ys = box(y, 0, 3, 2, 5, 4, 9);
};

TEST(CpuGemm, MatMulStridedSequenceSliceOverwrite) {
  GemmBed t;
  const Op op = t.make(OpCode::MatMul, {t.xs, t.ws}, {t.ys});
  const Mat want = matmul(t.get(t.xs), t.get(t.ws));
  t.poison(t.ys);
  const std::vector<float> before = t.raw(t.y);
  t.run(op);
  t.expect_near(t.ys, want, kAtol, kRtol, "y");
  expect_untouched_outside(t, t.ys, before);
}

TEST(CpuGemm, MatMulBiasAddedOnceWhenAccumulating) {
  GemmBed t;
  OpAttrs acc;
  acc.accumulate = true;
  const Op plain = t.make(OpCode::MatMul, {t.xs, t.ws, t.bs}, {t.ys});
  const Op accum = t.make(OpCode::MatMul, {t.xs, t.ws, t.bs}, {t.ys}, acc);
  Mat xw_b = matmul(t.get(t.xs), t.get(t.ws));
  const Mat b = t.get(t.bs);
  for (int64_t i = 0; i < xw_b.rows; ++i)
    for (int64_t j = 0; j < xw_b.cols; ++j) xw_b(i, j) += b(0, j);

  t.poison(t.ys);
  t.run(plain);
  t.expect_near(t.ys, xw_b, kAtol, kRtol, "y = xW + b");

  const Mat old = t.get(t.ys);
  t.run(accum);
  t.expect_near(t.ys, add(old, xw_b), kAtol, kRtol, "y += xW + b");
}

TEST(CpuGemm, MatMulMixedRowStructures) {
  // Input uniform (a whole [3,3,6] buffer), output a strided sequence slice of a larger buffer.
  GemmBed t;
  const int32_t a = t.buffer("a", 3, 3, 6);
  const Op op = t.make(OpCode::MatMul, {t.whole(a), t.ws}, {t.ys});
  const Mat want = matmul(t.get(t.whole(a)), t.get(t.ws));
  t.poison(t.ys);
  t.run(op);
  t.expect_near(t.ys, want, kAtol, kRtol, "y");
}

TEST(CpuGemm, MatMulWholeBuffers) {
  Bed t;
  const int32_t a = t.buffer("a", 2, 16, 32), w = t.buffer("w", 1, 32, 24), y = t.buffer("y", 2, 16, 24);
  const Op op = t.make(OpCode::MatMul, {t.whole(a), t.whole(w)}, {t.whole(y)});
  const Mat want = matmul(t.get(t.whole(a)), t.get(t.whole(w)));
  t.poison(t.whole(y));
  t.run(op);
  t.expect_near(t.whole(y), want, 1e-5, 1e-5, "y");
}

TEST(CpuGemm, DgradStridedSequenceSlice) {
  GemmBed t;
  // dX[rows, 6] (+)= dY[rows, 5] · W[6, 5]^T, written into columns [2, 8) of x.
  for (bool accumulate : {false, true}) {
    OpAttrs attrs;
    attrs.accumulate = accumulate;
    const Op op = t.make(OpCode::MatMulDgrad, {t.ys, t.ws}, {t.xs}, attrs);
    Mat want = matmul(t.get(t.ys), t.get(t.ws), false, true);
    if (accumulate) {
      want = add(want, t.get(t.xs));
    } else {
      t.poison(t.xs);
    }
    const std::vector<float> before = t.raw(t.x);
    t.run(op);
    t.expect_near(t.xs, want, kAtol, kRtol, accumulate ? "dx +=" : "dx =");
    expect_untouched_outside(t, t.xs, before);
  }
}

TEST(CpuGemm, WgradSumsOverAllBatchBlocks) {
  GemmBed t;
  const int32_t db = t.buffer("db", 1, 1, 15);
  const Region dbs = box(db, 0, 1, 0, 1, 5, 10);
  for (bool accumulate : {false, true}) {
    OpAttrs attrs;
    attrs.accumulate = accumulate;
    const Op op = t.make(OpCode::MatMulWgrad, {t.xs, t.ys}, {t.ws, dbs}, attrs);
    Mat want_w = matmul(t.get(t.xs), t.get(t.ys), true, false);
    const Mat dy = t.get(t.ys);
    Mat want_b(1, dy.cols);
    for (int64_t i = 0; i < dy.rows; ++i)
      for (int64_t j = 0; j < dy.cols; ++j) want_b(0, j) += dy(i, j);
    if (accumulate) {
      want_w = add(want_w, t.get(t.ws));
      want_b = add(want_b, t.get(dbs));
    } else {
      t.poison(t.ws);
      t.poison(dbs);
    }
    const std::vector<float> before = t.raw(t.w);
    t.run(op);
    t.expect_near(t.ws, want_w, kAtol, kRtol, "dW");
    t.expect_near(dbs, want_b, kAtol, kRtol, "db");
    expect_untouched_outside(t, t.ws, before);
  }
}

TEST(CpuGemm, SlicedMatMulsEqualTheUnslicedOne) {
  // Two sequence halves of a 2-batch input give exactly the rows of the full product (same k order).
  Bed t;
  const int32_t a = t.buffer("a", 2, 8, 16), w = t.buffer("w", 1, 16, 12);
  const int32_t full = t.buffer("full", 2, 8, 12), sliced = t.buffer("sliced", 2, 8, 12);
  t.run(t.make(OpCode::MatMul, {t.whole(a), t.whole(w)}, {t.whole(full)}));
  t.poison(t.whole(sliced));
  for (int h = 0; h < 2; ++h) {
    t.run(t.make(OpCode::MatMul, {box(a, 0, 2, 4 * h, 4 * h + 4, 0, 16), t.whole(w)},
                 {box(sliced, 0, 2, 4 * h, 4 * h + 4, 0, 12)}));
  }
  t.expect_near(t.whole(sliced), t.get(t.whole(full)), 1e-6, 1e-6, "sliced vs full");
}

}  // namespace
}  // namespace domino::cputest
