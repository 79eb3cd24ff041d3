// cpu_norm.cpp: LayerNorm and RMSNorm, forward and backward, one row at a time. The forward stores
// (mean, rstd) per row so that the backward does not recompute statistics; parameter gradients are
// accumulated in double over the region's rows, which keeps sliced and unsliced runs close.
#include "executor/cpu/cpu_views.hpp"

#include <Eigen/Core>

#include <cmath>
#include <cstring>
#include <vector>

namespace domino::cpu {

void norm_fwd(const Op& op, const CpuOpContext& ctx, bool layer_norm) {
  const View x = view_of(ctx, op.in[0]);
  const View y = view_of(ctx, op.out[0]);
  const View stats = view_of(ctx, op.out[1]);
  const int64_t h = x.cols;
  const ArrayRowMap gamma = view_of(ctx, op.in[1]).row_array(0);
  const ArrayRowMap beta = layer_norm ? view_of(ctx, op.in[2]).row_array(0) : gamma;
  const float eps = op.attrs.eps;
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

// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) with dxhat = dy * gamma (RMSNorm: without
// the mean(dxhat) term, since the mean was not subtracted); dgamma = sum dy * xhat, dbeta = sum dy.
void norm_bwd(const Op& op, const CpuOpContext& ctx, bool layer_norm) {
  const View x = view_of(ctx, op.in[0]);
  const View stats = view_of(ctx, op.in[1]);
  const ArrayRowMap gamma = view_of(ctx, op.in[2]).row_array(0);
  const View dx = view_of(ctx, op.out[0]);
  const int64_t h = x.cols;
  const int n_chunks = op.attrs.chunks;
  const int64_t hc = h / n_chunks;
  View dy_chunks[kMaxIn];
  for (int c = 0; c < n_chunks; ++c) dy_chunks[c] = view_of(ctx, op.in[size_t(3 + c)]);
  const bool has_dbeta = layer_norm && op.n_out > 2;

  ArrayRowMap dy(scratch(h, 0), h);
  ArrayRowMap xhat(scratch(h, 1), h);
  ArrayRowMap dxhat(scratch(h, 2), h);
  thread_local std::vector<double> acc;
  acc.assign(size_t(2 * h), 0.0);
  Eigen::Map<Eigen::Array<double, 1, Eigen::Dynamic>> dgamma_acc(acc.data(), h), dbeta_acc(acc.data() + h, h);

  for (int64_t r = 0; r < x.rows; ++r) {
    for (int c = 0; c < n_chunks; ++c) {
      std::memcpy(dy.data() + c * hc, dy_chunks[c].row(r), size_t(hc) * sizeof(float));
    }
    const float mean = stats.row(r)[0], rstd = stats.row(r)[1];
    xhat = (x.row_array(r) - mean) * rstd;
    dxhat = dy * gamma;
    const float dot = h > 0 ? (dxhat * xhat).mean() : 0.0f;
    const float dmean = layer_norm && h > 0 ? dxhat.mean() : 0.0f;
    ArrayRowMap dxr = dx.row_array(r);
    if (op.attrs.accumulate) {
      dxr += rstd * (dxhat - dmean - xhat * dot);
    } else {
      dxr = rstd * (dxhat - dmean - xhat * dot);
    }
    dgamma_acc += (dy * xhat).cast<double>();
    if (has_dbeta) dbeta_acc += dy.cast<double>();
  }

  ArrayRowMap dgamma = view_of(ctx, op.out[1]).row_array(0);
  if (op.attrs.accumulate_params) {
    dgamma += dgamma_acc.cast<float>();
  } else {
    dgamma = dgamma_acc.cast<float>();
  }
  if (!has_dbeta) return;
  ArrayRowMap dbeta = view_of(ctx, op.out[2]).row_array(0);
  if (op.attrs.accumulate_params) {
    dbeta += dbeta_acc.cast<float>();
  } else {
    dbeta = dbeta_acc.cast<float>();
  }
}

}  // namespace domino::cpu
