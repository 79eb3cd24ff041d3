// cpu_activation_test.cpp: GeLU (tanh), ReLU, SwiGLU and GeGLU forward/backward against double references
// and finite differences, on strided column chunks and sequence-split rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "tests/executor/cpu_test_util.hpp"

namespace domino::cputest {
namespace {

double gelu(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
double silu(double x) { return x / (1.0 + std::exp(-x)); }

// An element-wise activation f: forward against f, backward against f' by central differences (of the
// double reference) and against finite differences of the kernel's own forward. Inputs within `gap` of 0
// move away from it (ReLU's kink, where a difference quotient straddles it).
void check_elementwise(OpCode fwd_code, OpCode bwd_code, double (*f)(double), double gap, const char* name) {
  Bed t;
  const int32_t x = t.buffer("x", 2, 6, 20, -4.0, 4.0), y = t.buffer("y", 2, 6, 16), dy = t.buffer("dy", 2, 6, 12);
  const Region xs = box(x, 0, 2, 2, 5, 3, 15), ys = box(y, 0, 2, 2, 5, 4, 16), dys = box(dy, 0, 2, 2, 5, 0, 12);
  const int32_t dx = t.buffer("dx", 2, 6, 12);
  const Region dxs = box(dx, 0, 2, 2, 5, 0, 12);
  Mat xv = t.get(xs);
  for (double& v : xv.v) v += v < 0 ? -gap : gap;
  t.set(xs, xv);
  xv = t.get(xs);  // as stored (float)
  const Mat dyv = t.get(dys);
  Mat want_y(xv.rows, xv.cols), want_dx(xv.rows, xv.cols);
  for (size_t i = 0; i < xv.v.size(); ++i) {
    const double h = 1e-6;
    want_y.v[i] = f(xv.v[i]);
    want_dx.v[i] = dyv.v[i] * (f(xv.v[i] + h) - f(xv.v[i] - h)) / (2 * h);
  }
  const Op fwd = t.make(fwd_code, {xs}, {ys});
  t.poison(ys);
  const std::vector<float> before = t.raw(y);
  t.run(fwd);
  t.expect_near(ys, want_y, 1e-6, 1e-5, name);
  expect_untouched_outside(t, ys, before);

  t.poison(dxs);
  t.run(t.make(bwd_code, {xs, dys}, {dxs}));
  t.expect_near(dxs, want_dx, 1e-5, 1e-4, (std::string(name) + "'").c_str());
  auto loss = [&] {
    t.run(fwd);
    return weighted_sum(t, ys, dyv);
  };
  expect_fd_gradient(t, xs, t.get(dxs), loss, 1e-2, 1e-3, 1e-2, (std::string(name) + " fd").c_str());
}

// A gated activation over FC1's [gate | up]: act(gate) * up, checked like check_elementwise; then its
// backward writing over its own input gives the same gradient as into a separate buffer.
void check_gated(OpCode fwd_code, OpCode bwd_code, double (*act)(double), const char* name) {
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
      const double gate = x(i, j), up = x(i, f + j), e = 1e-6;
      want(i, j) = act(gate) * up;
      want_d(i, j) = g(i, j) * up * (act(gate + e) - act(gate - e)) / (2 * e);
      want_d(i, f + j) = g(i, j) * act(gate);
    }
  const Op fwd = t.make(fwd_code, {ins}, {outs});
  t.poison(outs);
  t.run(fwd);
  t.expect_near(outs, want, 1e-6, 1e-5, name);
  t.poison(dins);
  const std::vector<float> before = t.raw(din);
  t.run(t.make(bwd_code, {ins, dys}, {dins}));
  t.expect_near(dins, want_d, 1e-5, 1e-4, (std::string(name) + "'").c_str());
  expect_untouched_outside(t, dins, before);
  auto loss = [&] {
    t.run(fwd);
    return weighted_sum(t, outs, g);
  };
  expect_fd_gradient(t, ins, t.get(dins), loss, 1e-2, 1e-3, 1e-2, (std::string(name) + " fd").c_str());

  Bed u;
  const int32_t x2 = u.buffer("in", 1, 4, 8), dy2 = u.buffer("dy", 1, 4, 4), ref = u.buffer("ref", 1, 4, 8);
  u.run(u.make(bwd_code, {u.whole(x2), u.whole(dy2)}, {u.whole(ref)}));
  u.run(u.make(bwd_code, {u.whole(x2), u.whole(dy2)}, {u.whole(x2)}));
  u.expect_near(u.whole(x2), u.get(u.whole(ref)), 0, 0, (std::string(name) + " in place").c_str());
}

double relu(double x) { return std::max(x, 0.0); }

TEST(CpuActivation, GeluForwardBackward) { check_elementwise(OpCode::GeluFwd, OpCode::GeluBwd, gelu, 0.0, "gelu"); }
TEST(CpuActivation, ReluForwardBackward) { check_elementwise(OpCode::ReluFwd, OpCode::ReluBwd, relu, 0.1, "relu"); }
TEST(CpuActivation, SwigluForwardBackward) { check_gated(OpCode::SwigluFwd, OpCode::SwigluBwd, silu, "swiglu"); }
// GeGLU uses the tanh form of GeLU (Hugging Face's gelu_pytorch_tanh), as GeLU does.
TEST(CpuActivation, GegluForwardBackward) { check_gated(OpCode::GegluFwd, OpCode::GegluBwd, gelu, "geglu"); }

}  // namespace
}  // namespace domino::cputest
