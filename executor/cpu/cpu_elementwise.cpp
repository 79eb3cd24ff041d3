// cpu_elementwise.cpp: row-wise ops without reductions across rows: residual add and rotary embedding.
// Rotary angles come from a per-thread cos/sin table computed in double once per (rotated width, length).
#include "executor/cpu/cpu_views.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <vector>

namespace domino::cpu {
namespace {

// cos/sin of pos * 10000^(-2i/d) for i < d/2, rows = positions; grown on demand.
struct RopeTable {
  int64_t head_dim = 0, positions = 0;
  std::vector<float> cos, sin;  // [positions][head_dim / 2]

  void ensure(int64_t d, int64_t needed) {
    if (d == head_dim && needed <= positions) return;
    const int64_t half = d / 2;
    const int64_t count = std::max(needed, d == head_dim ? positions * 2 : needed);
    cos.resize(size_t(count * half));
    sin.resize(size_t(count * half));
    for (int64_t p = 0; p < count; ++p) {
      for (int64_t i = 0; i < half; ++i) {
        const double angle = double(p) * std::pow(10000.0, -2.0 * double(i) / double(d));
        cos[size_t(p * half + i)] = float(std::cos(angle));
        sin[size_t(p * half + i)] = float(std::sin(angle));
      }
    }
    head_dim = d;
    positions = count;
  }
};

}  // namespace

void residual_add(const Op& op, const CpuOpContext& ctx) {
  const View a = view_of(ctx, op.in[0]), b = view_of(ctx, op.in[1]), out = view_of(ctx, op.out[0]);
  const std::optional<View> bias = optional_input(ctx, op, 2);
  for_each_run(
      a.rows,
      [&](int64_t r, int64_t n) {
        if (bias) {
          out.map(r, n) = (a.map(r, n) + b.map(r, n)).rowwise() + bias->map(0, 1).row(0);
        } else {
          out.map(r, n) = a.map(r, n) + b.map(r, n);
        }
      },
      a, b, out);
}

// Rotate-half over the first r columns of each head (r = rotary_dims, or d): (x_i, x_{i+r/2}) ->
// (x_i cos - x_{i+r/2} sin, x_i sin + x_{i+r/2} cos), angles from r; the inverse uses -sin. Columns
// [r, d) of a head pass through (copied when the op is not in place).
void rope(const Op& op, const CpuOpContext& ctx, bool inverse) {
  const View dst = view_of(ctx, op.out[0]);
  const View src = op.n_in > 0 ? view_of(ctx, op.in[0]) : dst;
  const int64_t heads = op.attrs.heads, d = op.attrs.head_dim;
  const int64_t rot = op.attrs.rotary_dims > 0 ? op.attrs.rotary_dims : d, half = rot / 2;
  thread_local RopeTable table;
  table.ensure(rot, dst.s0 + dst.seq_rows);  // every batch entry covers the same seq range
  const float sign = inverse ? -1.0f : 1.0f;
  for (int64_t r = 0; r < dst.rows; ++r) {
    const int64_t pos = dst.seq_index(r);
    const float* c = table.cos.data() + pos * half;
    const float* s = table.sin.data() + pos * half;
    const float* in = src.row(r);
    float* out = dst.row(r);
    for (int64_t h = 0; h < heads; ++h) {
      const float* x = in + h * d;
      float* y = out + h * d;
      for (int64_t i = 0; i < half; ++i) {
        const float x1 = x[i], x2 = x[i + half], si = sign * s[i];
        y[i] = x1 * c[i] - x2 * si;
        y[i + half] = x1 * si + x2 * c[i];
      }
      if (y != x) std::copy(x + rot, x + d, y + rot);
    }
  }
}

}  // namespace domino::cpu
