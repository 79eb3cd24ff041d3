// cpu_elementwise_test.cpp: residual add, rotary embedding (reference, inverse, adjointness), token and
// positional embedding with its scatter-add gradient, and the cross-entropy loss.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/base/error.hpp"
#include "tests/executor/cpu_test_util.hpp"

namespace domino::cputest {
namespace {

TEST(CpuElementwise, ResidualAddWithBiasOnStridedRegions) {
  Bed t;
  const int32_t a = t.buffer("a", 3, 5, 7), b = t.buffer("b", 3, 5, 6), bias = t.buffer("bias", 1, 1, 9);
  const Region as = box(a, 0, 3, 1, 3, 1, 7), bs = box(b, 0, 3, 1, 3, 0, 6), biass = box(bias, 0, 1, 0, 1, 3, 9);
  Mat want = add(t.get(as), t.get(bs));
  const Mat bv = t.get(biass);
  for (int64_t i = 0; i < want.rows; ++i)
    for (int64_t j = 0; j < want.cols; ++j) want(i, j) += bv(0, j);
  const std::vector<float> before = t.raw(a);
  t.run(t.make(OpCode::ResidualAdd, {as, bs, biass}, {as}));  // in place on in[0]
  t.expect_near(as, want, 1e-6, 1e-6, "a + b + bias");
  expect_untouched_outside(t, as, before);
}

struct RopeBed : Bed {
  static constexpr int64_t kD = 4;
  int32_t qk = buffer("qk", 2, 6, 3 * kD + 1);
  Region q = box(qk, 0, 2, 2, 5, 0, 2 * kD);        // 2 query heads
  Region k = box(qk, 0, 2, 2, 5, 2 * kD, 3 * kD);   // 1 key head, column offset 8
  Op op(OpCode code, const Region& r, int16_t heads) {
    OpAttrs a;
    a.heads = heads, a.head_dim = kD;
    return make(code, {r}, {r}, a);
  }
};

Mat rope_reference(const Mat& x, int64_t s0, int64_t seq_rows, int64_t d, double sign) {
  Mat y(x.rows, x.cols);
  for (int64_t r = 0; r < x.rows; ++r) {
    const double pos = double(s0 + r % seq_rows);
    for (int64_t h = 0; h < x.cols / d; ++h)
      for (int64_t i = 0; i < d / 2; ++i) {
        const double th = pos * std::pow(10000.0, -2.0 * double(i) / double(d)), c = std::cos(th),
                     s = sign * std::sin(th);
        const double x1 = x(r, h * d + i), x2 = x(r, h * d + i + d / 2);
        y(r, h * d + i) = x1 * c - x2 * s;
        y(r, h * d + i + d / 2) = x1 * s + x2 * c;
      }
  }
  return y;
}

TEST(CpuElementwise, RopeMatchesReferenceAndInverts) {
  RopeBed t;
  const Mat q0 = t.get(t.q), k0 = t.get(t.k);
  const std::vector<float> before = t.raw(t.qk);
  t.run(t.op(OpCode::RopeFwd, t.q, 2));
  t.run(t.op(OpCode::RopeFwd, t.k, 1));
  t.expect_near(t.q, rope_reference(q0, 2, 3, RopeBed::kD, 1.0), 1e-6, 1e-5, "rope(q)");
  t.expect_near(t.k, rope_reference(k0, 2, 3, RopeBed::kD, 1.0), 1e-6, 1e-5, "rope(k)");
  t.run(t.op(OpCode::RopeBwd, t.q, 2));
  t.run(t.op(OpCode::RopeBwd, t.k, 1));
  t.expect_near(t.q, q0, 1e-6, 1e-5, "inverse(rope(q))");
  t.expect_near(t.k, k0, 1e-6, 1e-5, "inverse(rope(k))");
  expect_untouched_outside(t, box(t.qk, 0, 2, 2, 5, 0, 3 * RopeBed::kD), before);
}

TEST(CpuElementwise, RopeBackwardIsTheAdjointOfForward) {
  // <Rope(x), y> == <x, RopeBwd(y)>: RopeBwd is the exact gradient of the (linear) forward.
  RopeBed t;
  const int32_t other = t.buffer("y", 2, 6, 3 * RopeBed::kD + 1);
  const Region y = box(other, 0, 2, 2, 5, 0, 2 * RopeBed::kD);
  const Mat x0 = t.get(t.q), y0 = t.get(y);
  t.run(t.op(OpCode::RopeFwd, t.q, 2));
  t.run(t.op(OpCode::RopeBwd, y, 2));
  const double lhs = weighted_sum(t, t.q, y0), rhs = weighted_sum(t, y, x0);
  EXPECT_NEAR(lhs, rhs, 1e-5 * (1 + std::abs(lhs)));
}

TEST(CpuElementwise, EmbeddingForwardBackwardWithPositions) {
  Bed t;
  const int64_t V = 5, h = 6;
  const int32_t ids = t.buffer("ids", 2, 4, 1), table = t.buffer("table", 1, V, h), pos = t.buffer("pos", 1, 4, h);
  const int32_t out = t.buffer("out", 2, 4, h), dy = t.buffer("dy", 2, 4, h);
  const int32_t dtable = t.buffer("dtable", 1, V, h), dpos = t.buffer("dpos", 1, 4, h);
  const int tokens[8] = {3, 0, 3, 4, 1, 3, 2, 0};
  for (int i = 0; i < 8; ++i) t.raw(ids)[size_t(i)] = float(tokens[i]);
  const Region ids_s = box(ids, 0, 2, 1, 3, 0, 1), out_s = box(out, 0, 2, 1, 3, 0, h), dy_s = box(dy, 0, 2, 1, 3, 0, h);
  const Mat tab = t.get(t.whole(table)), pv = t.get(t.whole(pos)), g = t.get(dy_s);
  Mat want(4, h), want_dt(V, h), want_dp(4, h);
  for (int64_t r = 0; r < 4; ++r) {
    const int64_t s = 1 + r % 2, tok = tokens[(r / 2) * 4 + s];
    for (int64_t j = 0; j < h; ++j) {
      want(r, j) = tab(tok, j) + pv(s, j);
      want_dt(tok, j) += g(r, j);
      want_dp(s, j) += g(r, j);
    }
  }
  t.poison(out_s);
  // The lookup, then the positions added in place, as the schedule emits them.
  t.run(t.make(OpCode::EmbeddingFwd, {ids_s, t.whole(table)}, {out_s}));
  t.run(t.make(OpCode::PositionAdd, {out_s, t.whole(pos)}, {out_s}));
  t.expect_near(out_s, want, 1e-6, 1e-6, "embedding");

  t.poison(t.whole(dtable));
  t.poison(t.whole(dpos));
  t.run(t.make(OpCode::EmbeddingBwd, {ids_s, dy_s}, {t.whole(dtable), t.whole(dpos)}));
  t.expect_near(t.whole(dtable), want_dt, 1e-6, 1e-6, "dtable");
  t.expect_near(t.whole(dpos), want_dp, 1e-6, 1e-6, "dpos");
  OpAttrs acc;
  acc.accumulate = true, acc.accumulate_params = true;  // the table's and the positions' gradients
  t.run(t.make(OpCode::EmbeddingBwd, {ids_s, dy_s}, {t.whole(dtable), t.whole(dpos)}, acc));
  t.expect_near(t.whole(dtable), add(want_dt, want_dt), 1e-6, 1e-6, "dtable accumulated");
  t.expect_near(t.whole(dpos), add(want_dp, want_dp), 1e-6, 1e-6, "dpos accumulated");

  t.raw(ids)[1] = 7.0f;  // batch 0, seq 1: outside the vocabulary
  const Op bad = t.make(OpCode::EmbeddingFwd, {ids_s, t.whole(table)}, {out_s});
  try {
    t.run(bad);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(std::string(e.what()).find(op_id(bad)), std::string::npos) << e.what();
  }
}

// The cross-entropy of one rank holding the whole vocabulary: max, sum of exp, then loss and dlogits (the
// AllReduces between them are identities on one rank).
struct CeBed : Bed {
  static constexpr int64_t kV = 7;
  int32_t logits = buffer("logits", 2, 3, kV, -3.0, 3.0);
  int32_t targets = buffer("targets", 2, 3, 1);
  int32_t max = buffer("loss.max", 2, 3, 1);
  int32_t sums = buffer("loss.sums", 2, 3, 2);
  int32_t loss = buffer("loss", 1, 1, 1);
  int32_t dlogits = buffer("dlogits", 2, 3, kV);
  CeBed() {
    for (int i = 0; i < 6; ++i) raw(targets)[size_t(i)] = float((i * 3) % kV);
  }
  // Runs the three ops on batch entries [b0, b1); returns the last (CrossEntropy).
  Op op(int64_t b0, int64_t b1, bool accumulate) {
    OpAttrs a;
    const Region x = box(logits, b0, b1, 0, 3, 0, kV), t = box(targets, b0, b1, 0, 3, 0, 1);
    const Region m = box(max, b0, b1, 0, 3, 0, 1), sm = box(sums, b0, b1, 0, 3, 0, 2);
    run(make(OpCode::LogitMax, {x}, {m}, a));
    run(make(OpCode::LogitSumExp, {x, t, m}, {sm}, a));
    a.accumulate = accumulate;
    return make(OpCode::CrossEntropy, {x, t, m, sm}, {whole(loss), box(dlogits, b0, b1, 0, 3, 0, kV)}, a);
  }
  double ref_loss(Mat* grad) {
    const Mat x = get(whole(logits));
    double total = 0;
    for (int64_t r = 0; r < 6; ++r) {
      const int64_t t = int64_t(raw(targets)[size_t(r)]);
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j < kV; ++j) mx = std::max(mx, x(r, j));
      for (int64_t j = 0; j < kV; ++j) sum += std::exp(x(r, j) - mx);
      total += std::log(sum) + mx - x(r, t);
      for (int64_t j = 0; j < kV && grad; ++j) (*grad)(r, j) = (std::exp(x(r, j) - mx) / sum - (j == t)) / 6.0;
    }
    return total / 6.0;
  }
};

TEST(CpuElementwise, CrossEntropyMatchesReferenceAndFiniteDifferences) {
  CeBed t;
  Mat grad(6, CeBed::kV);
  const double want = t.ref_loss(&grad);
  t.poison(t.whole(t.loss));
  t.poison(t.whole(t.dlogits));
  const Op full = t.op(0, 2, false);
  t.run(full);
  EXPECT_NEAR(t.raw(t.loss)[0], want, 1e-6 * std::abs(want) + 1e-7);
  t.expect_near(t.whole(t.dlogits), grad, 1e-7, 1e-5, "dlogits");
  auto loss = [&] {
    t.run(t.op(0, 2, false));  // max and sums follow the perturbed logits
    return double(t.raw(t.loss)[0]);
  };
  expect_fd_gradient(t, t.whole(t.logits), t.get(t.whole(t.dlogits)), loss, 1e-2, 2e-4, 1e-2, "dlogits fd");
}

TEST(CpuElementwise, CrossEntropySlicesAccumulateTheMeanAndStayStable) {
  CeBed t;
  const double want = t.ref_loss(nullptr);
  t.poison(t.whole(t.loss));
  t.run(t.op(0, 1, false));
  t.run(t.op(1, 2, true));
  EXPECT_NEAR(t.raw(t.loss)[0], want, 1e-6 * std::abs(want) + 1e-7);

  for (size_t i = 0; i < t.raw(t.logits).size(); ++i) t.raw(t.logits)[i] = (i % 2 ? 1.0f : -1.0f) * 200.0f;
  t.run(t.op(0, 2, false));
  EXPECT_TRUE(std::isfinite(t.raw(t.loss)[0]));
  for (float g : t.raw(t.dlogits)) EXPECT_TRUE(std::isfinite(g));
}

}  // namespace
}  // namespace domino::cputest
