// cpu_activation_test.cpp: GeLU (tanh) and SwiGLU forward/backward against double references and finite
// differences, on strided column chunks and sequence-split rows.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/executor/cpu_test_util.hpp"

namespace domino::cputest {
namespace {

double gelu(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
double silu(double x) { return x / (1.0 + std::exp(-x)); }

TEST(CpuActivation, GeluForwardBackward) {
  Bed t;
  const int32_t x = t.buffer("x", 2, 6, 20, -4.0, 4.0), y = t.buffer("y", 2, 6, 16), dy = t.buffer("dy", 2, 6, 12);
  const Region xs = box(x, 0, 2, 2, 5, 3, 15), ys = box(y, 0, 2, 2, 5, 4, 16), dys = box(dy, 0, 2, 2, 5, 0, 12);
  const int32_t dx = t.buffer("dx", 2, 6, 12);
  const Region dxs = box(dx, 0, 2, 2, 5, 0, 12);
  const Mat xv = t.get(xs), dyv = t.get(dys);
  Mat want_y(xv.rows, xv.cols);
  for (size_t i = 0; i < xv.v.size(); ++i) want_y.v[i] = gelu(xv.v[i]);

  const Op fwd = t.make(OpCode::GeluFwd, {xs}, {ys});
  t.poison(ys);
  const std::vector<float> before = t.raw(y);
  t.run(fwd);
  t.expect_near(ys, want_y, 1e-6, 1e-5, "gelu");
  expect_untouched_outside(t, ys, before);

  t.poison(dxs);
  t.run(t.make(OpCode::GeluBwd, {xs, dys}, {dxs}));
  Mat want_dx(xv.rows, xv.cols);
  for (size_t i = 0; i < xv.v.size(); ++i) {
    const double h = 1e-6;
    want_dx.v[i] = dyv.v[i] * (gelu(xv.v[i] + h) - gelu(xv.v[i] - h)) / (2 * h);
  }
  t.expect_near(dxs, want_dx, 1e-5, 1e-4, "gelu'");
  auto loss = [&] {
    t.run(fwd);
    return weighted_sum(t, ys, dyv);
  };
  expect_fd_gradient(t, xs, t.get(dxs), loss, 1e-2, 1e-3, 1e-2, "gelu fd");
}

TEST(CpuActivation, SwigluForwardBackward) {
  Bed t;
  const int64_t f = 5;
  // [gate | up] at column offset 1 of a wider buffer, rows = sequence slice of 3 batch entries.
  const int32_t in = t.buffer("in", 3, 4, 2 * f + 2, -5.0, 5.0), out = t.buffer("out", 3, 4, f);
  const int32_t dy = t.buffer("dy", 3, 4, f), din = t.buffer("din", 3, 4, 2 * f + 1);
  const Region ins = box(in, 0, 3, 1, 3, 1, 1 + 2 * f), outs = box(out, 0, 3, 1, 3, 0, f);
  const Region dys = box(dy, 0, 3, 1, 3, 0, f), dins = box(din, 0, 3, 1, 3, 1, 1 + 2 * f);
  const Mat x = t.get(ins), g = t.get(dys);
  Mat want(x.rows, f), want_d(x.rows, 2 * f);
  for (int64_t i = 0; i < x.rows; ++i)
    for (int64_t j = 0; j < f; ++j) {
      const double gate = x(i, j), up = x(i, f + j), s = 1.0 / (1.0 + std::exp(-gate));
      want(i, j) = silu(gate) * up;
      want_d(i, j) = g(i, j) * up * (s + gate * s * (1 - s));
      want_d(i, f + j) = g(i, j) * silu(gate);
    }
  const Op fwd = t.make(OpCode::SwigluFwd, {ins}, {outs});
  t.poison(outs);
  t.run(fwd);
  t.expect_near(outs, want, 1e-6, 1e-5, "swiglu");
  t.poison(dins);
  const std::vector<float> before = t.raw(din);
  t.run(t.make(OpCode::SwigluBwd, {ins, dys}, {dins}));
  t.expect_near(dins, want_d, 1e-6, 1e-5, "swiglu'");
  expect_untouched_outside(t, dins, before);
  auto loss = [&] {
    t.run(fwd);
    return weighted_sum(t, outs, g);
  };
  expect_fd_gradient(t, ins, t.get(dins), loss, 1e-2, 1e-3, 1e-2, "swiglu fd");
}

TEST(CpuActivation, SwigluBackwardMayOverwriteItsInput) {
  Bed t;
  const int32_t in = t.buffer("in", 1, 4, 8), dy = t.buffer("dy", 1, 4, 4), ref = t.buffer("ref", 1, 4, 8);
  t.run(t.make(OpCode::SwigluBwd, {t.whole(in), t.whole(dy)}, {t.whole(ref)}));
  t.run(t.make(OpCode::SwigluBwd, {t.whole(in), t.whole(dy)}, {t.whole(in)}));
  t.expect_near(t.whole(in), t.get(t.whole(ref)), 0, 0, "in place");
}

}  // namespace
}  // namespace domino::cputest
