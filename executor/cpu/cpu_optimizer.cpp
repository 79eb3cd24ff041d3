// cpu_optimizer.cpp: the parameter updates, applied elementwise over whole buffers: AdamW (bias-corrected,
// decoupled weight decay, as torch.optim.AdamW) and SGD with momentum (as torch.optim.SGD, dampening 0).
#include "executor/cpu/cpu_views.hpp"

#include <Eigen/Core>
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "sim/base/error.hpp"

namespace domino::cpu {

// p *= 1 - lr*wd (parameters marked to decay); m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
void adam_step(const Op& op, const CpuOpContext& ctx) {
  if (ctx.step < 1) throw_runtime(fmt::format("op {}: optimizer step {} (steps are 1-based)", op_id(op), ctx.step));
  const OptimizerHyper& hp = ctx.hyper;
  const View g = view_of(ctx, op.in[0]);
  const View p = view_of(ctx, op.out[0]);
  const View m = view_of(ctx, op.out[1]);
  const View v = view_of(ctx, op.out[2]);
  const double t = double(ctx.step);
  const float step_size = float(double(hp.lr) / (1.0 - std::pow(double(hp.beta1), t)));
  const float inv_sqrt_bc2 = float(1.0 / std::sqrt(1.0 - std::pow(double(hp.beta2), t)));
  const float decay = op.attrs.weight_decay ? 1.0f - hp.lr * hp.weight_decay : 1.0f;
  const float b1 = hp.beta1, b2 = hp.beta2, eps = hp.eps;
  for_each_run(
      g.rows,
      [&](int64_t r, int64_t n) {
        const auto ga = g.map(r, n).array();
        auto pa = p.map(r, n).array();
        auto ma = m.map(r, n).array();
        auto va = v.map(r, n).array();
        ma = b1 * ma + (1.0f - b1) * ga;
        va = b2 * va + (1.0f - b2) * ga.square();
        pa = decay * pa - step_size * ma / (va.sqrt() * inv_sqrt_bc2 + eps);
      },
      g, p, m, v);
}

// g' = g + wd p; m = momentum m + g'; p -= lr m.
void sgd_step(const Op& op, const CpuOpContext& ctx) {
  const OptimizerHyper& hp = ctx.hyper;
  const View g = view_of(ctx, op.in[0]);
  const View p = view_of(ctx, op.out[0]);
  const View m = view_of(ctx, op.out[1]);
  const float wd = op.attrs.weight_decay ? hp.weight_decay : 0.0f;
  for_each_run(
      g.rows,
      [&](int64_t r, int64_t n) {
        auto pa = p.map(r, n).array();
        auto ma = m.map(r, n).array();
        ma = hp.momentum * ma + g.map(r, n).array() + wd * pa;
        pa -= hp.lr * ma;
      },
      g, p, m);
}

}  // namespace domino::cpu
