// cpu_norm.cpp: LayerNorm and RMSNorm, forward and backward, one row at a time. The forward stores
// (mean, rstd) per row so that the backward does not recompute statistics; parameter gradients are
// accumulated in double over the region's rows, which keeps sliced and unsliced runs close.
// Grouped norms (QK-norm per head, attrs.head_dim > 0) split every row into groups of head_dim columns
// that share one gamma: each batch entry is seen as rows of one group (grouped() below), so the same row
// loops serve both.
#include "executor/cpu/cpu_views.hpp"

#include <Eigen/Core>

#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

namespace domino::cpu {
namespace {

// Batch entry b of v with each row cut into `groups` rows of cols / groups columns.
View grouped(const View& v, int64_t b, int64_t groups) {
  View g;
  g.base = v.base + b * v.block_stride;
  g.cols = v.cols / groups;
  g.ld = g.cols;
  g.rows = v.seq_rows * groups;
  g.block_rows = groups;
  g.block_stride = v.ld;
  g.seq_rows = g.rows;
  g.s0 = v.s0;
  return g;
}

// The groups of a row: 1 for an ordinary norm.
int64_t groups_of(const Op& op, const View& x) {
  return op.attrs.head_dim > 0 ? x.cols / op.attrs.head_dim : 1;
}

// The operands as views whose rows are the normalised units: the views themselves (one group), or one
// grouped view per batch entry. f(part views...) is called once per part.
template <typename F, typename... Views>
void for_each_part(int64_t groups, F&& f, const Views&... views) {
  if (groups == 1) return f(views...);
  const View& first = std::get<0>(std::tie(views...));
  for (int64_t b = 0; b < first.batches(); ++b) f(grouped(views, b, groups)...);
}

void norm_fwd_rows(const View& x, const View& y, const View& stats, const ArrayRowMap& gamma,
                   const ArrayRowMap& beta, float eps, bool layer_norm) {
  const int64_t h = x.cols;
  for (int64_t r = 0; r < x.rows; ++r) {
    const ArrayRowMap xr = x.row_array(r);
    ArrayRowMap yr = y.row_array(r);
    float* st = stats.row(r);
    if (h == 0) {
      st[0] = 0.0f;
      st[1] = 1.0f / std::sqrt(eps);
      continue;
    }
    if (layer_norm) {
      const float mean = xr.mean();
      const float rstd = 1.0f / std::sqrt((xr - mean).square().mean() + eps);
      yr = (xr - mean) * rstd * gamma + beta;
      st[0] = mean;
      st[1] = rstd;
    } else {
      const float rstd = 1.0f / std::sqrt(xr.square().mean() + eps);
      yr = xr * rstd * gamma;
      st[0] = 0.0f;
      st[1] = rstd;
    }
  }
}

// What the backward's row loop shares across parts: gamma, the flags and the double accumulators.
struct NormBwdState {
  const float* gamma;
  bool layer_norm, accumulate, has_dbeta;
  Eigen::Map<Eigen::Array<double, 1, Eigen::Dynamic>> dgamma, dbeta;
};

// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) with dxhat = dy * gamma (RMSNorm: without
// the mean(dxhat) term, since the mean was not subtracted); dgamma = sum dy * xhat, dbeta = sum dy.
// dy is given as n column chunks of width h / n.
void norm_bwd_rows(const View& x, const View& stats, const View* dy_chunks, int n_chunks, const View& dx,
                   NormBwdState& st) {
  const int64_t h = x.cols, hc = h / n_chunks;
  const ArrayRowMap gamma(const_cast<float*>(st.gamma), h);
  ArrayRowMap dy(scratch(h, 0), h);
  ArrayRowMap xhat(scratch(h, 1), h);
  ArrayRowMap dxhat(scratch(h, 2), h);
  for (int64_t r = 0; r < x.rows; ++r) {
    for (int c = 0; c < n_chunks; ++c) {
      std::memcpy(dy.data() + c * hc, dy_chunks[c].row(r), size_t(hc) * sizeof(float));
    }
    const float mean = stats.row(r)[0], rstd = stats.row(r)[1];
    xhat = (x.row_array(r) - mean) * rstd;
    dxhat = dy * gamma;
    const float dot = h > 0 ? (dxhat * xhat).mean() : 0.0f;
    const float dmean = st.layer_norm && h > 0 ? dxhat.mean() : 0.0f;
    ArrayRowMap dxr = dx.row_array(r);
    if (st.accumulate) {
      dxr += rstd * (dxhat - dmean - xhat * dot);
    } else {
      dxr = rstd * (dxhat - dmean - xhat * dot);
    }
    st.dgamma += (dy * xhat).cast<double>();
    if (st.has_dbeta) st.dbeta += dy.cast<double>();
  }
}

void store_param_grad(const View& out, const Eigen::Map<Eigen::Array<double, 1, Eigen::Dynamic>>& acc, bool add) {
  ArrayRowMap g = out.row_array(0);
  if (add) {
    g += acc.cast<float>();
  } else {
    g = acc.cast<float>();
  }
}

}  // namespace

void norm_fwd(const Op& op, const CpuOpContext& ctx, bool layer_norm) {
  const View x = view_of(ctx, op.in[0]);
  const ArrayRowMap gamma = view_of(ctx, op.in[1]).row_array(0);
  const ArrayRowMap beta = layer_norm ? view_of(ctx, op.in[2]).row_array(0) : gamma;
  for_each_part(
      groups_of(op, x),
      [&](const View& xp, const View& yp, const View& sp) {
        norm_fwd_rows(xp, yp, sp, gamma, beta, op.attrs.eps, layer_norm);
      },
      x, view_of(ctx, op.out[0]), view_of(ctx, op.out[1]));
}

void norm_bwd(const Op& op, const CpuOpContext& ctx, bool layer_norm) {
  const View x = view_of(ctx, op.in[0]);
  const int n_chunks = op.attrs.chunks;
  const int64_t groups = groups_of(op, x), h = x.cols / groups;
  View dy_chunks[kMaxIn];
  for (int c = 0; c < n_chunks; ++c) dy_chunks[c] = view_of(ctx, op.in[size_t(3 + c)]);
  thread_local std::vector<double> acc;
  acc.assign(size_t(2 * h), 0.0);
  NormBwdState st{view_of(ctx, op.in[2]).row(0), layer_norm, op.attrs.accumulate, layer_norm && op.n_out > 2,
                  {acc.data(), h}, {acc.data() + h, h}};
  if (groups == 1) {
    norm_bwd_rows(x, view_of(ctx, op.in[1]), dy_chunks, n_chunks, view_of(ctx, op.out[0]), st);
  } else {  // one dy chunk (the verifier's rule)
    for_each_part(
        groups,
        [&](const View& xp, const View& sp, const View& dyp, const View& dxp) {
          norm_bwd_rows(xp, sp, &dyp, 1, dxp, st);
        },
        x, view_of(ctx, op.in[1]), dy_chunks[0], view_of(ctx, op.out[0]));
  }
  store_param_grad(view_of(ctx, op.out[1]), st.dgamma, op.attrs.accumulate_params);
  if (st.has_dbeta) store_param_grad(view_of(ctx, op.out[2]), st.dbeta, op.attrs.accumulate_params);
}

}  // namespace domino::cpu
