// cpu_attention_test.cpp: causal grouped-query attention (H=4, KV=2) forward/backward against a double
// reference; sequence-split query slices reproduce the rows of full attention; finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/executor/cpu_test_util.hpp"

namespace domino::cputest {
namespace {

constexpr int64_t kB = 2, kS = 8, kH = 4, kKV = 2, kD = 4;

struct AttnBed : Bed {
  int32_t qkv = buffer("qkv", kB, kS, (kH + 2 * kKV) * kD, -1.5, 1.5);
  int32_t probs = buffer("probs", kB, kS, kH * kS);
  int32_t ctx = buffer("ctx", kB, kS, kH * kD);
  int32_t dctx = buffer("dctx", kB, kS, kH * kD);
  int32_t dqkv = buffer("dqkv", kB, kS, (kH + 2 * kKV) * kD);

  // Rows [s0, s1) of every batch entry; keys [0, kv_end).
  Region q(int64_t s0, int64_t s1, int32_t buf = -1) { return box(buf < 0 ? qkv : buf, 0, kB, s0, s1, 0, kH * kD); }
  Region k(int64_t kv_end, int32_t buf = -1) {
    return box(buf < 0 ? qkv : buf, 0, kB, 0, kv_end, kH * kD, (kH + kKV) * kD);
  }
  Region v(int64_t kv_end, int32_t buf = -1) {
    return box(buf < 0 ? qkv : buf, 0, kB, 0, kv_end, (kH + kKV) * kD, (kH + 2 * kKV) * kD);
  }
  Region p(int64_t s0, int64_t s1) { return box(probs, 0, kB, s0, s1, 0, kH * kS); }
  Region c(int64_t s0, int64_t s1, int32_t buf = -1) { return box(buf < 0 ? ctx : buf, 0, kB, s0, s1, 0, kH * kD); }
  static OpAttrs attrs(bool accumulate = false) {
    OpAttrs a;
    a.heads = kH, a.kv_heads = kKV, a.head_dim = kD, a.accumulate = accumulate;
    return a;
  }
  Op fwd(int64_t s0, int64_t s1, int64_t kv_end) {
    return make(OpCode::AttnFwd, {q(s0, s1), k(kv_end), v(kv_end)}, {c(s0, s1), p(s0, s1)}, attrs());
  }
  Op bwd(int64_t s0, int64_t s1, int64_t kv_end, bool accumulate) {
    return make(OpCode::AttnBwd, {q(s0, s1), k(kv_end), v(kv_end), p(s0, s1), c(s0, s1, dctx)},
                {q(s0, s1, dqkv), k(kv_end, dqkv), v(kv_end, dqkv)}, attrs(accumulate));
  }
};

struct AttnRef {
  Mat ctx, probs, dq, dk, dv;  // full [B*S, ...] matrices
};

AttnRef reference(const Mat& q, const Mat& k, const Mat& v, const Mat& dc) {
  AttnRef r{Mat(kB * kS, kH * kD), Mat(kB * kS, kH * kS), Mat(kB * kS, kH * kD), Mat(kB * kS, kKV * kD),
            Mat(kB * kS, kKV * kD)};
  const double scale = 1.0 / std::sqrt(double(kD));
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t h = 0; h < kH; ++h) {
      const int64_t g = h / (kH / kKV);
      for (int64_t i = 0; i < kS; ++i) {
        const int64_t qi = b * kS + i;
        std::vector<double> p(size_t(i + 1)), dp(size_t(i + 1));
        double mx = -1e300, sum = 0, dot = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double s = 0;
          for (int64_t e = 0; e < kD; ++e) s += q(qi, h * kD + e) * k(b * kS + j, g * kD + e);
          p[size_t(j)] = s * scale;
          mx = std::max(mx, p[size_t(j)]);
        }
        for (auto& x : p) sum += (x = std::exp(x - mx));
        for (int64_t j = 0; j <= i; ++j) {
          p[size_t(j)] /= sum;
          r.probs(qi, h * kS + j) = p[size_t(j)];
          double d = 0;
          for (int64_t e = 0; e < kD; ++e) {
            r.ctx(qi, h * kD + e) += p[size_t(j)] * v(b * kS + j, g * kD + e);
            r.dv(b * kS + j, g * kD + e) += p[size_t(j)] * dc(qi, h * kD + e);
            d += dc(qi, h * kD + e) * v(b * kS + j, g * kD + e);
          }
          dp[size_t(j)] = d;
          dot += d * p[size_t(j)];
        }
        for (int64_t j = 0; j <= i; ++j) {
          const double ds = p[size_t(j)] * (dp[size_t(j)] - dot) * scale;
          for (int64_t e = 0; e < kD; ++e) {
            r.dq(qi, h * kD + e) += ds * k(b * kS + j, g * kD + e);
            r.dk(b * kS + j, g * kD + e) += ds * q(qi, h * kD + e);
          }
        }
      }
    }
  return r;
}

AttnRef reference(AttnBed& t) {
  return reference(t.get(t.q(0, kS)), t.get(t.k(kS)), t.get(t.v(kS)), t.get(t.c(0, kS, t.dctx)));
}

// Rows [s0, s1) of every batch entry of a full [B*S, cols] reference matrix.
Mat rows_of(const Mat& full, int64_t s0, int64_t s1) {
  Mat m(kB * (s1 - s0), full.cols);
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t i = s0; i < s1; ++i)
      for (int64_t j = 0; j < full.cols; ++j) m(b * (s1 - s0) + i - s0, j) = full(b * kS + i, j);
  return m;
}

TEST(CpuAttention, ForwardMatchesReferenceWithGqa) {
  AttnBed t;
  const AttnRef want = reference(t);
  t.poison(t.c(0, kS));
  t.poison(t.p(0, kS));
  t.run(t.fwd(0, kS, kS));
  t.expect_near(t.c(0, kS), want.ctx, 1e-6, 1e-5, "context");
  t.expect_near(t.p(0, kS), want.probs, 1e-6, 1e-5, "probabilities (zeros above the diagonal)");
}

TEST(CpuAttention, SequenceSlicesReproduceFullAttention) {
  AttnBed t;
  const AttnRef want = reference(t);
  t.poison(t.c(0, kS));
  t.poison(t.p(0, kS));
  t.run(t.fwd(4, 8, 8));  // late queries see all keys
  t.run(t.fwd(0, 4, 4));  // early queries only need keys [0, 4); P columns beyond are written as 0
  t.expect_near(t.c(4, 8), rows_of(want.ctx, 4, 8), 1e-6, 1e-5, "context rows [4,8)");
  t.expect_near(t.c(0, 4), rows_of(want.ctx, 0, 4), 1e-6, 1e-5, "context rows [0,4)");
  t.expect_near(t.p(0, kS), want.probs, 1e-6, 1e-5, "probabilities");
}

TEST(CpuAttention, BackwardMatchesReference) {
  AttnBed t;
  const AttnRef want = reference(t);
  t.run(t.fwd(0, kS, kS));
  t.poison(t.whole(t.dqkv));
  t.run(t.bwd(0, kS, kS, false));
  t.expect_near(t.q(0, kS, t.dqkv), want.dq, 1e-5, 1e-4, "dQ");
  t.expect_near(t.k(kS, t.dqkv), want.dk, 1e-5, 1e-4, "dK");
  t.expect_near(t.v(kS, t.dqkv), want.dv, 1e-5, 1e-4, "dV");
}

TEST(CpuAttention, SlicedBackwardAccumulatesKeyGradients) {
  AttnBed t;
  const AttnRef want = reference(t);
  t.run(t.fwd(4, 8, 8));
  t.run(t.fwd(0, 4, 4));
  t.poison(t.whole(t.dqkv));
  t.run(t.bwd(4, 8, 8, false));  // first slice writes all keys [0, 8)
  t.run(t.bwd(0, 4, 4, true));   // second adds into keys [0, 4)
  t.expect_near(t.q(0, kS, t.dqkv), want.dq, 1e-5, 1e-4, "dQ");
  t.expect_near(t.k(kS, t.dqkv), want.dk, 1e-5, 1e-4, "dK");
  t.expect_near(t.v(kS, t.dqkv), want.dv, 1e-5, 1e-4, "dV");
}

TEST(CpuAttention, BackwardMatchesFiniteDifferences) {
  AttnBed t;
  const Op fwd = t.fwd(0, kS, kS);
  const Mat w = t.get(t.c(0, kS, t.dctx));
  auto loss = [&] {
    t.run(fwd);
    return weighted_sum(t, t.c(0, kS), w);
  };
  loss();
  t.run(t.bwd(0, kS, kS, false));
  expect_fd_gradient(t, t.q(0, kS), t.get(t.q(0, kS, t.dqkv)), loss, 1e-2, 1e-3, 1e-2, "dQ");
  expect_fd_gradient(t, t.k(kS), t.get(t.k(kS, t.dqkv)), loss, 1e-2, 1e-3, 1e-2, "dK");
  expect_fd_gradient(t, t.v(kS), t.get(t.v(kS, t.dqkv)), loss, 1e-2, 1e-3, 1e-2, "dV");
}

}  // namespace
}  // namespace domino::cputest
