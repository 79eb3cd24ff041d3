// cpu_activation.cpp: GeLU (tanh approximation) and SwiGLU, forward and backward, as vectorised Eigen
// array expressions (Eigen's float tanh/exp) over runs of strided rows.
#include "executor/cpu/cpu_views.hpp"

#include <Eigen/Core>

namespace domino::cpu {
namespace {

constexpr float kGeluC0 = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluC1 = 0.044715f;

}  // namespace

void gelu_fwd(const Op& op, const CpuOpContext& ctx) {
  const View x = view_of(ctx, op.in[0]);
  const View y = view_of(ctx, op.out[0]);
  for_each_run(
      x.rows,
      [&](int64_t r, int64_t n) {
        const auto xa = x.map(r, n).array();
        y.map(r, n).array() = 0.5f * xa * (1.0f + (kGeluC0 * (xa + kGeluC1 * xa.cube())).tanh());
      },
      x, y);
}

// d/dx gelu = 0.5 (1 + t) + 0.5 x (1 - t^2) c0 (1 + 3 c1 x^2), t = tanh(c0 (x + c1 x^3)).
void gelu_bwd(const Op& op, const CpuOpContext& ctx) {
  const View x = view_of(ctx, op.in[0]);
  const View dy = view_of(ctx, op.in[1]);
  const View dx = view_of(ctx, op.out[0]);
  ArrayRowMap t(scratch(x.cols), x.cols);
  for (int64_t r = 0; r < x.rows; ++r) {
    const ArrayRowMap xr = x.row_array(r);
    t = (kGeluC0 * (xr + kGeluC1 * xr.cube())).tanh();
    dx.row_array(r) = dy.row_array(r) * (0.5f * (1.0f + t) + 0.5f * xr * (1.0f - t.square()) * kGeluC0 *
                                                                 (1.0f + 3.0f * kGeluC1 * xr.square()));
  }
}

// out = silu(gate) * up, silu(g) = g * sigmoid(g).
void swiglu_fwd(const Op& op, const CpuOpContext& ctx) {
  const View in = view_of(ctx, op.in[0]);
  const int64_t f = in.cols / 2;
  const View gate = in.columns(0, f), up = in.columns(f, f);
  const View out = view_of(ctx, op.out[0]);
  for_each_run(
      in.rows,
      [&](int64_t r, int64_t n) {
        const auto g = gate.map(r, n).array();
        out.map(r, n).array() = g / (1.0f + (-g).exp()) * up.map(r, n).array();
      },
      in, out);
}

// dgate = dy * up * s (1 + g (1 - s)), dup = dy * g * s with s = sigmoid(g). Written so that out may
// alias the forward input.
void swiglu_bwd(const Op& op, const CpuOpContext& ctx) {
  const View in = view_of(ctx, op.in[0]);
  const int64_t f = in.cols / 2;
  const View gate = in.columns(0, f), up = in.columns(f, f);
  const View dy = view_of(ctx, op.in[1]);
  const View out = view_of(ctx, op.out[0]);
  const View dgate = out.columns(0, f), dup = out.columns(f, f);
  ArrayRowMap s(scratch(f, 0), f);
  ArrayRowMap dg(scratch(f, 1), f);
  for (int64_t r = 0; r < in.rows; ++r) {
    const ArrayRowMap g = gate.row_array(r);
    const ArrayRowMap dyr = dy.row_array(r);
    s = 1.0f / (1.0f + (-g).exp());
    dg = dyr * up.row_array(r) * s * (1.0f + g * (1.0f - s));
    dup.row_array(r) = dyr * g * s;
    dgate.row_array(r) = dg;
  }
}

}  // namespace domino::cpu
