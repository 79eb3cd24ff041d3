// cpu_optimizer_test.cpp: AdamW and SGD-with-momentum steps against hand-computed updates.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/executor/cpu_test_util.hpp"

namespace domino::cputest {
namespace {

TEST(CpuOptimizer, AdamStepMatchesHandComputedUpdate) {
  Bed t;
  const int32_t g = t.buffer("g", 1, 3, 4), p = t.buffer("p", 1, 3, 4), m = t.buffer("m", 1, 3, 4);
  const int32_t v = t.buffer("v", 1, 3, 4, 0.0, 0.01);
  t.hyper.lr = 0.1f, t.hyper.beta1 = 0.8f, t.hyper.beta2 = 0.95f, t.hyper.eps = 1e-6f, t.hyper.weight_decay = 0.05f;
  t.step = 3;
  const Mat g0 = t.get(t.whole(g)), p0 = t.get(t.whole(p)), m0 = t.get(t.whole(m)), v0 = t.get(t.whole(v));
  Mat pw(3, 4), mw(3, 4), vw(3, 4);
  for (size_t i = 0; i < g0.v.size(); ++i) {
    mw.v[i] = 0.8 * m0.v[i] + 0.2 * g0.v[i];
    vw.v[i] = 0.95 * v0.v[i] + 0.05 * g0.v[i] * g0.v[i];
    const double mhat = mw.v[i] / (1 - std::pow(0.8, 3)), vhat = vw.v[i] / (1 - std::pow(0.95, 3));
    pw.v[i] = p0.v[i] * (1 - 0.1 * 0.05) - 0.1 * mhat / (std::sqrt(vhat) + 1e-6);
  }
  OpAttrs decaying;
  decaying.weight_decay = true;  // a weight matrix (biases and norms do not decay)
  t.run(t.make(OpCode::AdamStep, {t.whole(g)}, {t.whole(p), t.whole(m), t.whole(v)}, decaying));
  t.expect_near(t.whole(m), mw, 1e-7, 1e-6, "m");
  t.expect_near(t.whole(v), vw, 1e-9, 1e-6, "v");
  t.expect_near(t.whole(p), pw, 1e-6, 1e-5, "p");
}

// Weight decay applies only to parameters the schedule marks (Megatron-LM leaves biases and norms alone).
TEST(CpuOptimizer, AdamLeavesUnmarkedParametersUndecayed) {
  Bed t;
  const int32_t g = t.buffer("g", 1, 2, 8, 0, 0), p = t.buffer("p", 1, 2, 8);
  const int32_t m = t.buffer("m", 1, 2, 8, 0, 0), v = t.buffer("v", 1, 2, 8, 0, 0);
  t.hyper.lr = 0.1f, t.hyper.weight_decay = 0.5f;
  const Mat p0 = t.get(t.whole(p));
  t.run(t.make(OpCode::AdamStep, {t.whole(g)}, {t.whole(p), t.whole(m), t.whole(v)}));
  t.expect_near(t.whole(p), p0, 0, 0, "p unchanged: zero gradient, no decay");
  OpAttrs decaying;
  decaying.weight_decay = true;
  t.step = 2;
  t.run(t.make(OpCode::AdamStep, {t.whole(g)}, {t.whole(p), t.whole(m), t.whole(v)}, decaying));
  Mat want = p0;
  for (double& x : want.v) x *= 1 - 0.1 * 0.5;
  t.expect_near(t.whole(p), want, 1e-6, 1e-6, "p decayed");
}

TEST(CpuOptimizer, AdamFirstStepMovesEachParameterByAboutLr) {
  Bed t;
  const int32_t g = t.buffer("g", 1, 2, 8), p = t.buffer("p", 1, 2, 8);
  const int32_t m = t.buffer("m", 1, 2, 8, 0, 0), v = t.buffer("v", 1, 2, 8, 0, 0);
  const Mat p0 = t.get(t.whole(p)), g0 = t.get(t.whole(g));
  t.run(t.make(OpCode::AdamStep, {t.whole(g)}, {t.whole(p), t.whole(m), t.whole(v)}));
  Mat want = p0;
  for (size_t i = 0; i < want.v.size(); ++i) want.v[i] -= 1e-3 * (g0.v[i] > 0 ? 1 : -1);
  t.expect_near(t.whole(p), want, 1e-6, 0, "p - lr * sign(g)");
}

TEST(CpuOptimizer, SgdMomentumStep) {
  Bed t;
  const int32_t g = t.buffer("g", 1, 3, 5), p = t.buffer("p", 1, 3, 5), m = t.buffer("m", 1, 3, 5);
  t.hyper.lr = 0.5f, t.hyper.momentum = 0.9f;
  const Mat g0 = t.get(t.whole(g)), p0 = t.get(t.whole(p)), m0 = t.get(t.whole(m));
  Mat pw(3, 5), mw(3, 5);
  for (size_t i = 0; i < g0.v.size(); ++i) {
    mw.v[i] = 0.9 * m0.v[i] + g0.v[i];
    pw.v[i] = p0.v[i] - 0.5 * mw.v[i];
  }
  t.run(t.make(OpCode::SgdStep, {t.whole(g)}, {t.whole(p), t.whole(m)}));
  t.expect_near(t.whole(m), mw, 1e-6, 1e-6, "momentum");
  t.expect_near(t.whole(p), pw, 1e-6, 1e-6, "p");
}

}  // namespace
}  // namespace domino::cputest
