// cpu_activation.cpp: GeLU (tanh approximation), ReLU, SwiGLU and GeGLU (gelu of the gate, the same tanh
// approximation), forward and backward, as vectorised Eigen array expressions (Eigen's float tanh/exp) over
// runs of strided rows.
#include "executor/cpu/cpu_views.hpp"

#include <Eigen/Core>

namespace domino::cpu {
namespace {

constexpr float kGeluC0 = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluC1 = 0.044715f;

// gelu(x) = 0.5 x (1 + tanh(c0 (x + c1 x^3))), of any Eigen array expression.
template <typename A>
auto gelu(const A& x) {
  return 0.5f * x * (1.0f + (kGeluC0 * (x + kGeluC1 * x.cube())).tanh());
}

// d/dx gelu = 0.5 (1 + t) + 0.5 x (1 - t^2) c0 (1 + 3 c1 x^2), t = tanh(c0 (x + c1 x^3)), into `out`
// (t is scratch of the row's width).
void gelu_grad(const ArrayRowMap& x, ArrayRowMap& t, ArrayRowMap& out) {
  t = (kGeluC0 * (x + kGeluC1 * x.cube())).tanh();
  out = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t.square()) * kGeluC0 * (1.0f + 3.0f * kGeluC1 * x.square());
}

}  // namespace

void gelu_fwd(const Op& op, const CpuOpContext& ctx) {
  const View x = view_of(ctx, op.in[0]);
  const View y = view_of(ctx, op.out[0]);
  for_each_run(
      x.rows, [&](int64_t r, int64_t n) { y.map(r, n).array() = gelu(x.map(r, n).array()); }, x, y);
}

void gelu_bwd(const Op& op, const CpuOpContext& ctx) {
  const View x = view_of(ctx, op.in[0]);
  const View dy = view_of(ctx, op.in[1]);
  const View dx = view_of(ctx, op.out[0]);
  ArrayRowMap t(scratch(x.cols, 0), x.cols);
  ArrayRowMap g(scratch(x.cols, 1), x.cols);
  for (int64_t r = 0; r < x.rows; ++r) {
    gelu_grad(x.row_array(r), t, g);
    dx.row_array(r) = dy.row_array(r) * g;
  }
}

void relu_fwd(const Op& op, const CpuOpContext& ctx) {
  const View x = view_of(ctx, op.in[0]);
  const View y = view_of(ctx, op.out[0]);
  for_each_run(
      x.rows, [&](int64_t r, int64_t n) { y.map(r, n).array() = x.map(r, n).array().max(0.0f); }, x, y);
}

// The gradient at 0 is taken as 0 (PyTorch's choice).
void relu_bwd(const Op& op, const CpuOpContext& ctx) {
  const View x = view_of(ctx, op.in[0]);
  const View dy = view_of(ctx, op.in[1]);
  const View dx = view_of(ctx, op.out[0]);
  for_each_run(
      x.rows,
      [&](int64_t r, int64_t n) {
        dx.map(r, n).array() = (x.map(r, n).array() > 0.0f).select(dy.map(r, n).array(), 0.0f);
      },
      x, dy, dx);
}

namespace {

// The gated activations (SwiGLU, GeGLU) read FC1's [gate | up]: out = act(gate) * up.
template <typename Act>
void gated_fwd(const Op& op, const CpuOpContext& ctx, Act act) {
  const View in = view_of(ctx, op.in[0]);
  const int64_t f = in.cols / 2;
  const View gate = in.columns(0, f), up = in.columns(f, f);
  const View out = view_of(ctx, op.out[0]);
  for_each_run(
      in.rows,
      [&](int64_t r, int64_t n) {
        out.map(r, n).array() = act(gate.map(r, n).array()) * up.map(r, n).array();
      },
      in, out);
}

// Their backward, row by row: row(g, up, dy, dup, t, dg) writes dgate into dg (t: scratch), then dup; dgate
// is stored last, so that out may alias the forward input.
template <typename Row>
void gated_bwd(const Op& op, const CpuOpContext& ctx, Row row) {
  const View in = view_of(ctx, op.in[0]);
  const int64_t f = in.cols / 2;
  const View gate = in.columns(0, f), up = in.columns(f, f);
  const View dy = view_of(ctx, op.in[1]);
  const View out = view_of(ctx, op.out[0]);
  const View dgate = out.columns(0, f), dup = out.columns(f, f);
  ArrayRowMap t(scratch(f, 0), f);
  ArrayRowMap dg(scratch(f, 1), f);
  for (int64_t r = 0; r < in.rows; ++r) {
    ArrayRowMap dup_r = dup.row_array(r);
    row(gate.row_array(r), up.row_array(r), dy.row_array(r), dup_r, t, dg);
    dgate.row_array(r) = dg;
  }
}

}  // namespace

// out = silu(gate) * up, silu(g) = g * sigmoid(g).
void swiglu_fwd(const Op& op, const CpuOpContext& ctx) {
  gated_fwd(op, ctx, [](const auto& g) { return g / (1.0f + (-g).exp()); });
}

// dgate = dy * up * s (1 + g (1 - s)), dup = dy * g * s with s = sigmoid(g).
void swiglu_bwd(const Op& op, const CpuOpContext& ctx) {
  gated_bwd(op, ctx,
            [](const ArrayRowMap& g, const ArrayRowMap& up, const ArrayRowMap& dy, ArrayRowMap& dup,
               ArrayRowMap& s, ArrayRowMap& dg) {
              s = 1.0f / (1.0f + (-g).exp());
              dg = dy * up * s * (1.0f + g * (1.0f - s));
              dup = dy * g * s;
            });
}

// out = gelu(gate) * up.
void geglu_fwd(const Op& op, const CpuOpContext& ctx) {
  gated_fwd(op, ctx, [](const auto& g) { return gelu(g); });
}

// dgate = dy * up * gelu'(g), dup = dy * gelu(g).
void geglu_bwd(const Op& op, const CpuOpContext& ctx) {
  gated_bwd(op, ctx,
            [](const ArrayRowMap& g, const ArrayRowMap& up, const ArrayRowMap& dy, ArrayRowMap& dup,
               ArrayRowMap& t, ArrayRowMap& dg) {
              gelu_grad(g, t, dg);
              dg *= dy * up;
              dup = dy * gelu(g);
            });
}

}  // namespace domino::cpu
