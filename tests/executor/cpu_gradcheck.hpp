// cpu_gradcheck.hpp: runs a whole schedule op by op on one CPU rank (tp = 1: AllReduce is the identity)
// and checks its parameter gradients against central finite differences of its loss. A structural feature
// of a model (parallel blocks, a norm, a mask, a tied weight) that the builder wires wrong shows up as a
// gradient that is not the derivative of the loss the same schedule computes.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "executor/cpu/cpu_ops.hpp"
#include "sim/ir/verify.hpp"
#include "sim/model/plan.hpp"

namespace domino {

// Buffers of one rank, initialised identically for every plan (seeded by buffer name): parameters small
// and random (norm gains near 1), optimizer state zero, token ids and targets a fixed pattern below the
// vocabulary (the token embedding's rows), everything else NaN so that reading an unwritten element
// poisons the result.
struct RankRun {
  const Schedule* s;
  std::vector<std::vector<float>> data;

  explicit RankRun(const Schedule& schedule) : s(&schedule) {
    int64_t vocab = 1;
    for (const BufferDesc& b : schedule.buffers)
      if (b.param == ParamKind::TokenEmbedding && b.role == BufferRole::Param) vocab = b.seq;
    for (const BufferDesc& b : schedule.buffers) {
      std::vector<float> v(size_t(b.elements()), std::numeric_limits<float>::quiet_NaN());
      std::mt19937 rng(uint32_t(std::hash<std::string>{}(b.name)));
      const bool norm_gain = b.name.ends_with("norm.g");
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      if (b.role == BufferRole::Param) {
        const float scale = norm_gain ? 0.1f : 1.0f / std::sqrt(float(b.seq));
        for (float& x : v) x = (norm_gain ? 1.0f : 0.0f) + scale * u(rng);
      } else if (b.role == BufferRole::OptState) {
        std::fill(v.begin(), v.end(), 0.0f);
      } else if (b.role == BufferRole::Data) {
        for (size_t i = 0; i < v.size(); ++i) v[i] = float((i * 37 + (b.name == "targets" ? 11 : 3)) % vocab);
      }
      data.push_back(std::move(v));
    }
  }

  std::vector<float>& buffer(const std::string& name) {
    for (size_t i = 0; i < s->buffers.size(); ++i)
      if (s->buffers[i].name == name) return data[i];
    throw std::runtime_error("no buffer " + name);
  }

  // One training iteration; with_optimizer=false stops before the optimizer ops. Returns the loss, NaN
  // (and a test failure) when an op wrote a non-finite value.
  float iterate(int64_t step, bool with_optimizer) {
    CpuOpContext ctx;
    ctx.schedule = s;
    for (auto& d : data) ctx.buffers.push_back(d.data());
    ctx.hyper.lr = 1e-2f;
    ctx.step = step;
    for (const Op& op : s->ops) {
      if (op.code == OpCode::AllReduce) continue;  // one rank: the sum over the group is the identity
      if (op.phase == Phase::Optimizer && !with_optimizer) continue;
      run_cpu_op(op, ctx);
      if (!outputs_finite(op)) return std::numeric_limits<float>::quiet_NaN();
    }
    return buffer("loss")[0];
  }

 private:
  bool outputs_finite(const Op& op) {
    for (int i = 0; i < op.n_out; ++i) {
      const Region& r = op.out[size_t(i)];
      const float* base = data[size_t(r.buffer)].data();
      const BufferDesc& b = s->buffers[size_t(r.buffer)];
      for (int64_t bb = r.b0; bb < r.b1; ++bb)
        for (int64_t q = r.s0; q < r.s1; ++q)
          for (int64_t c = r.c0; c < r.c1; ++c) {
            const float x = base[(bb * b.seq + q) * b.cols + c];
            if (!std::isfinite(x)) {
              ADD_FAILURE() << "op " << op_id(op) << " wrote " << x << " into '" << b.name << "'";
              return false;
            }
          }
    }
    return true;
  }
};

// One parameter buffer's check: the schedule's gradient projected on a random direction v (entries +-1)
// against (loss(p + eps v) - loss(p - eps v)) / (2 eps). Projecting on a direction sums over every
// element, so float rounding of the loss stays far below the signal.
struct GradientCheck {
  std::string param;
  double analytic = 0;
  double numeric = 0;
  bool close(double rel = 2e-2, double abs = 5e-4) const {
    return std::abs(analytic - numeric) <= rel * std::abs(numeric) + abs;
  }
};

inline std::vector<GradientCheck> check_gradients(const Schedule& s, double eps = 1e-3) {
  RankRun base(s);
  base.iterate(1, false);
  std::vector<GradientCheck> checks;
  for (size_t i = 0; i < s.buffers.size(); ++i) {
    const BufferDesc& p = s.buffers[i];
    if (p.role != BufferRole::Param) continue;
    int32_t grad = -1;
    for (size_t g = 0; g < s.buffers.size(); ++g)
      if (s.buffers[g].role == BufferRole::Grad && s.buffers[g].param == p.param && s.buffers[g].layer == p.layer)
        grad = int32_t(g);
    if (grad < 0 || p.param == ParamKind::None) continue;
    std::mt19937 rng(uint32_t(i) * 7919u + 1u);
    std::vector<float> dir(size_t(p.elements()));
    for (float& x : dir) x = (rng() & 1u) ? 1.0f : -1.0f;
    GradientCheck c{p.name};
    for (size_t k = 0; k < dir.size(); ++k) c.analytic += double(base.data[size_t(grad)][k]) * dir[k];
    const auto loss_at = [&](double sign) {
      RankRun run(s);
      for (size_t k = 0; k < dir.size(); ++k) run.data[i][k] += float(sign * eps) * dir[k];
      return double(run.iterate(1, false));
    };
    c.numeric = (loss_at(1) - loss_at(-1)) / (2 * eps);
    checks.push_back(c);
  }
  return checks;
}

// Expects run's gradient buffers to equal ref's of the same names, each within rel of the reference buffer's
// largest element. Returns how many buffers it compared.
inline int expect_same_gradients(RankRun& ref, RankRun& run, double rel) {
  int compared = 0;
  for (const BufferDesc& b : ref.s->buffers) {
    if (b.role != BufferRole::Grad) continue;
    const std::vector<float>& want = ref.buffer(b.name);
    const std::vector<float>& got = run.buffer(b.name);
    double max_err = 0, max_ref = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      max_err = std::max(max_err, double(std::abs(got[i] - want[i])));
      max_ref = std::max(max_ref, double(std::abs(want[i])));
    }
    EXPECT_LE(max_err, rel * max_ref) << b.name;
    ++compared;
  }
  return compared;
}

// A tiny fp32 model for one CPU rank (tp = 1): GPT (LayerNorm, GeLU, learned positions) or Llama (RMSNorm,
// SwiGLU, rotary, grouped-query attention, no biases).
inline ModelSpec tiny_cpu_model(bool llama, int layers) {
  ModelSpec m = default_model();
  m.name = llama ? "tiny-llama" : "tiny-gpt";
  m.layers = layers, m.hidden = 32, m.heads = 4, m.kv_heads = llama ? 2 : 4, m.ffn_hidden = 48;
  m.vocab = 40, m.seq_len = 8, m.micro_batch = 4, m.tp = 1;
  if (llama) {
    m.family = Family::Llama, m.positions = Positions::Rotary, m.activation = Activation::Swiglu;
    m.norm = NormKind::RmsNorm, m.set_biases(false);
  }
  return m;
}

// Builds (model, plan), verifies it, and expects every parameter's gradient to match its finite
// difference. Returns the checks for further assertions.
inline std::vector<GradientCheck> expect_gradients_match(const ModelSpec& m, const Plan& plan) {
  validate_plan(plan, m);
  const Schedule s = build_schedule(m, plan);
  verify_schedule(s);
  verify_ops(s);
  const std::vector<GradientCheck> checks = check_gradients(s);
  EXPECT_GT(checks.size(), 4u);
  for (const GradientCheck& c : checks) {
    EXPECT_TRUE(c.close()) << c.param << ": schedule gradient . v = " << c.analytic
                           << ", finite difference = " << c.numeric;
  }
  return checks;
}

}  // namespace domino
