// cpu_norm_test.cpp: LayerNorm / RMSNorm forward and backward against a double reference (sequence-split
// rows, strided columns, dy in column chunks, accumulate flags) and against finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/executor/cpu_test_util.hpp"

namespace domino::cputest {
namespace {

constexpr int64_t kH = 8;

struct NormRef {
  Mat y, stats, dx, dgamma, dbeta;
};

NormRef reference(const Mat& x, const Mat& gamma, const Mat& beta, const Mat& dy, bool ln, double eps) {
  NormRef r{Mat(x.rows, kH), Mat(x.rows, 2), Mat(x.rows, kH), Mat(1, kH), Mat(1, kH)};
  for (int64_t i = 0; i < x.rows; ++i) {
    double mean = 0, var = 0;
    if (ln) {
      for (int64_t j = 0; j < kH; ++j) mean += x(i, j) / kH;
    }
    for (int64_t j = 0; j < kH; ++j) var += (x(i, j) - mean) * (x(i, j) - mean) / kH;
    const double rstd = 1.0 / std::sqrt(var + eps);
    r.stats(i, 0) = mean, r.stats(i, 1) = rstd;
    double sum_g = 0, sum_gx = 0;
    std::vector<double> xhat(kH), g(kH);
    for (int64_t j = 0; j < kH; ++j) {
      xhat[j] = (x(i, j) - mean) * rstd;
      r.y(i, j) = xhat[j] * gamma(0, j) + (ln ? beta(0, j) : 0.0);
      g[j] = dy(i, j) * gamma(0, j);
      sum_g += g[j] / kH, sum_gx += g[j] * xhat[j] / kH;
      r.dgamma(0, j) += dy(i, j) * xhat[j];
      r.dbeta(0, j) += dy(i, j);
    }
    for (int64_t j = 0; j < kH; ++j) r.dx(i, j) = rstd * (g[j] - (ln ? sum_g : 0.0) - xhat[j] * sum_gx);
  }
  return r;
}

struct NormBed : Bed {
  bool ln;
  int32_t x = buffer("x", 3, 6, kH + 3);
  int32_t gb = buffer("gamma_beta", 1, 2, kH, 0.5, 1.5);
  int32_t y = buffer("y", 3, 6, kH);
  int32_t st = buffer("stats", 3, 6, 2);
  int32_t dy0 = buffer("dy0", 3, 6, kH / 2), dy1 = buffer("dy1", 3, 6, kH / 2);
  int32_t dx = buffer("dx", 3, 6, kH + 1);
  int32_t dp = buffer("dparams", 1, 2, kH);
  Region xs = box(x, 0, 3, 1, 4, 2, 2 + kH);  // strided: 3 blocks of 3 rows, column offset 2
  Region gamma = box(gb, 0, 1, 0, 1, 0, kH), beta = box(gb, 0, 1, 1, 2, 0, kH);
  Region ys = box(y, 0, 3, 1, 4, 0, kH), sts = box(st, 0, 3, 1, 4, 0, 2);
  Region dy0s = box(dy0, 0, 3, 1, 4, 0, kH / 2), dy1s = box(dy1, 0, 3, 1, 4, 0, kH / 2);
  Region dxs = box(dx, 0, 3, 1, 4, 1, 1 + kH);
  Region dgamma = box(dp, 0, 1, 0, 1, 0, kH), dbeta = box(dp, 0, 1, 1, 2, 0, kH);

  explicit NormBed(bool layer_norm) : ln(layer_norm) {}
  Op fwd() {
    OpAttrs a;
    a.eps = 1e-5f;
    return ln ? make(OpCode::LayerNormFwd, {xs, gamma, beta}, {ys, sts}, a)
              : make(OpCode::RmsNormFwd, {xs, gamma}, {ys, sts}, a);
  }
  Op bwd(bool acc, bool acc_params) {
    OpAttrs a;
    a.chunks = 2, a.accumulate = acc, a.accumulate_params = acc_params;
    return ln ? make(OpCode::LayerNormBwd, {xs, sts, gamma, dy0s, dy1s}, {dxs, dgamma, dbeta}, a)
              : make(OpCode::RmsNormBwd, {xs, sts, gamma, dy0s, dy1s}, {dxs, dgamma}, a);
  }
  Mat dy() {
    Mat m(xs.rows(), kH);
    const Mat a = get(dy0s), b = get(dy1s);
    for (int64_t i = 0; i < m.rows; ++i)
      for (int64_t j = 0; j < kH; ++j) m(i, j) = j < kH / 2 ? a(i, j) : b(i, j - kH / 2);
    return m;
  }
};

class CpuNorm : public ::testing::TestWithParam<bool> {};

TEST_P(CpuNorm, ForwardMatchesReference) {
  NormBed t(GetParam());
  const NormRef want = reference(t.get(t.xs), t.get(t.gamma), t.get(t.beta), t.dy(), t.ln, 1e-5);
  t.poison(t.ys);
  t.poison(t.sts);
  t.run(t.fwd());
  t.expect_near(t.ys, want.y, 1e-5, 1e-5, "y");
  t.expect_near(t.sts, want.stats, 1e-6, 1e-5, "stats");
}

TEST_P(CpuNorm, BackwardMatchesReferenceWithAccumulateFlags) {
  NormBed t(GetParam());
  const NormRef want = reference(t.get(t.xs), t.get(t.gamma), t.get(t.beta), t.dy(), t.ln, 1e-5);
  t.run(t.fwd());
  t.poison(t.dxs);
  t.poison(t.dgamma);
  t.poison(t.dbeta);
  t.run(t.bwd(false, false));
  t.expect_near(t.dxs, want.dx, 1e-5, 1e-4, "dx");
  t.expect_near(t.dgamma, want.dgamma, 1e-5, 1e-5, "dgamma");
  if (t.ln) t.expect_near(t.dbeta, want.dbeta, 1e-5, 1e-5, "dbeta");

  // Accumulating dx only, then parameters only.
  t.run(t.bwd(true, false));
  Mat twice_dx = add(want.dx, want.dx);
  t.expect_near(t.dxs, twice_dx, 1e-5, 1e-4, "dx += dx");
  t.expect_near(t.dgamma, want.dgamma, 1e-5, 1e-5, "dgamma overwritten");
  t.run(t.bwd(false, true));
  t.expect_near(t.dxs, want.dx, 1e-5, 1e-4, "dx overwritten");
  t.expect_near(t.dgamma, add(want.dgamma, want.dgamma), 1e-5, 1e-5, "dgamma += dgamma");
  if (t.ln) t.expect_near(t.dbeta, add(want.dbeta, want.dbeta), 1e-5, 1e-5, "dbeta += dbeta");
}

TEST_P(CpuNorm, BackwardMatchesFiniteDifferences) {
  NormBed t(GetParam());
  const Op fwd = t.fwd();
  const Mat w = t.dy();  // loss = sum(y * w), so dy = w
  auto loss = [&] {
    t.run(fwd);
    return weighted_sum(t, t.ys, w);
  };
  loss();
  t.run(t.bwd(false, false));
  const Mat dx = t.get(t.dxs), dgamma = t.get(t.dgamma), dbeta = t.get(t.dbeta);
  expect_fd_gradient(t, t.xs, dx, loss, 1e-2, 2e-3, 1e-2, "dx");
  expect_fd_gradient(t, t.gamma, dgamma, loss, 1e-2, 2e-3, 1e-2, "dgamma", 8);
  if (t.ln) expect_fd_gradient(t, t.beta, dbeta, loss, 1e-2, 2e-3, 1e-2, "dbeta", 8);
}

INSTANTIATE_TEST_SUITE_P(LayerAndRms, CpuNorm, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "LayerNorm" : "RmsNorm"; });

}  // namespace
}  // namespace domino::cputest
