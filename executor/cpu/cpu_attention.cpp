// cpu_attention.cpp: causal (grouped-query) attention for the query rows of one slice, per batch entry
// and head: scores straight into the probabilities region, softmax in place, then context = P · V.
// The backward recomputes nothing but dP = dctx · V^T (per-thread scratch) and uses the stored P.
#include "executor/cpu/cpu_views.hpp"

#include <Eigen/Core>

#include <cmath>

namespace domino::cpu {
namespace {

struct AttnShape {
  int64_t heads, group, d, kv_end, probs_stride;  // probs_stride: columns per head in P (seq_len)
  float scale;
};

AttnShape attn_shape(const Op& op, const Region& p) {
  AttnShape s;
  s.heads = op.attrs.heads;
  s.group = op.attrs.heads / op.attrs.kv_heads;
  s.d = op.attrs.head_dim;
  s.kv_end = op.in[1].s1;
  s.probs_stride = p.cols() / s.heads;
  s.scale = float(1.0 / std::sqrt(double(s.d)));
  return s;
}

}  // namespace

void attn_fwd(const Op& op, const CpuOpContext& ctx) {
  const View q = view_of(ctx, op.in[0]), k = view_of(ctx, op.in[1]), v = view_of(ctx, op.in[2]);
  const View c = view_of(ctx, op.out[0]), p = view_of(ctx, op.out[1]);
  const AttnShape s = attn_shape(op, op.out[1]);
  const int64_t sq = q.seq_rows, L = s.probs_stride;
  for (int64_t b = 0; b < q.batches(); ++b) {
    const MatMap qb = q.batch(b), kb = k.batch(b), vb = v.batch(b);
    MatMap cb = c.batch(b), pb = p.batch(b);
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t g = h / s.group;
      auto scores = pb.middleCols(h * L, s.kv_end);
      scores.noalias() = s.scale * (qb.middleCols(h * s.d, s.d) * kb.middleCols(g * s.d, s.d).transpose());
      for (int64_t j = 0; j < sq; ++j) {
        const int64_t visible = q.s0 + j + 1;  // keys at positions <= the query's
        ArrayRowMap row(pb.row(j).data() + h * L, L);
        auto live = row.head(visible);
        live = (live - live.maxCoeff()).exp();
        live /= live.sum();
        row.tail(L - visible).setZero();
      }
      cb.middleCols(h * s.d, s.d).noalias() = scores * vb.middleCols(g * s.d, s.d);
    }
  }
}

// dV_g (+)= P^T dC; dP = dC V^T; dS = P ∘ (dP - rowsum(P ∘ dP)); dQ = scale dS K; dK_g (+)= scale dS^T Q.
// Query heads sharing a KV head g accumulate into the same dK/dV columns.
void attn_bwd(const Op& op, const CpuOpContext& ctx) {
  const View q = view_of(ctx, op.in[0]), k = view_of(ctx, op.in[1]), v = view_of(ctx, op.in[2]);
  const View p = view_of(ctx, op.in[3]), dc = view_of(ctx, op.in[4]);
  const View dq = view_of(ctx, op.out[0]), dk = view_of(ctx, op.out[1]), dv = view_of(ctx, op.out[2]);
  const AttnShape s = attn_shape(op, op.in[3]);
  const int64_t sq = q.seq_rows, L = s.probs_stride;
  MatMap ds(scratch(sq * s.kv_end), sq, s.kv_end, Eigen::OuterStride<>(s.kv_end));
  for (int64_t b = 0; b < q.batches(); ++b) {
    const MatMap qb = q.batch(b), kb = k.batch(b), vb = v.batch(b), pb = p.batch(b), dcb = dc.batch(b);
    MatMap dqb = dq.batch(b), dkb = dk.batch(b), dvb = dv.batch(b);
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t g = h / s.group;
      const bool overwrite = !op.attrs.accumulate && h % s.group == 0;
      const auto probs = pb.middleCols(h * L, s.kv_end);
      const auto dctx = dcb.middleCols(h * s.d, s.d);
      auto dv_g = dvb.middleCols(g * s.d, s.d);
      auto dk_g = dkb.middleCols(g * s.d, s.d);
      if (overwrite) {
        dv_g.noalias() = probs.transpose() * dctx;
      } else {
        dv_g.noalias() += probs.transpose() * dctx;
      }
      ds.noalias() = dctx * vb.middleCols(g * s.d, s.d).transpose();
      for (int64_t j = 0; j < sq; ++j) {
        const float dot = ds.row(j).dot(probs.row(j));
        ds.row(j).array() = probs.row(j).array() * (ds.row(j).array() - dot);
      }
      dqb.middleCols(h * s.d, s.d).noalias() = s.scale * (ds * kb.middleCols(g * s.d, s.d));
      if (overwrite) {
        dk_g.noalias() = s.scale * (ds.transpose() * qb.middleCols(h * s.d, s.d));
      } else {
        dk_g.noalias() += s.scale * (ds.transpose() * qb.middleCols(h * s.d, s.d));
      }
    }
  }
}

}  // namespace domino::cpu
