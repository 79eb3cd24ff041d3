// cpu_attention.cpp: causal (grouped-query) attention for the query rows of one slice, per batch entry
// and head: scores straight into the probabilities region, softmax in place, then context = P · V.
// The backward recomputes nothing but dP = dctx · V^T (per-thread scratch) and uses the stored P.
// Like a causal GPU kernel, both passes work in blocks of query rows and skip the key blocks above the
// diagonal: a block of queries ending at position e touches keys [0, e] only (the IR charges the same work).
#include "executor/cpu/cpu_views.hpp"

#include <Eigen/Core>

#include <algorithm>
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

// Query rows per block: the masked work a block still does is at most its own triangle.
constexpr int64_t kQueryBlock = 64;

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
      for (int64_t j0 = 0; j0 < sq; j0 += kQueryBlock) {
        const int64_t n = std::min(kQueryBlock, sq - j0);
        const int64_t keys = std::min(s.kv_end, q.s0 + j0 + n);  // keys the block's last query sees
        auto scores = pb.block(j0, h * L, n, keys);
        scores.noalias() =
            s.scale * (qb.block(j0, h * s.d, n, s.d) * kb.middleCols(g * s.d, s.d).topRows(keys).transpose());
        for (int64_t j = j0; j < j0 + n; ++j) {
          const int64_t visible = q.s0 + j + 1;  // keys at positions <= the query's
          ArrayRowMap row(pb.row(j).data() + h * L, L);
          auto live = row.head(visible);
          live = (live - live.maxCoeff()).exp();
          live /= live.sum();
          row.tail(L - visible).setZero();
        }
        cb.block(j0, h * s.d, n, s.d).noalias() = scores * vb.middleCols(g * s.d, s.d).topRows(keys);
      }
    }
  }
}

namespace {

// One block of query rows [j0, j0 + n) of head h in the backward, over the keys [0, keys) they see.
struct AttnBwdBlock {
  int64_t h, g, j0, n, keys;
};

// dV_g += P^T dC; dP = dC V^T; dS = P ∘ (dP - rowsum(P ∘ dP)); dQ = scale dS K; dK_g += scale dS^T Q.
void attn_bwd_block(const AttnShape& s, const AttnBwdBlock& blk, const MatMap& qb, const MatMap& kb,
                    const MatMap& vb, const MatMap& pb, const MatMap& dcb, MatMap& dqb, MatMap& dkb, MatMap& dvb,
                    MatMap& ds) {
  const int64_t L = s.probs_stride;
  const auto probs = pb.block(blk.j0, blk.h * L, blk.n, blk.keys);
  const auto dctx = dcb.block(blk.j0, blk.h * s.d, blk.n, s.d);
  auto dsb = ds.topLeftCorner(blk.n, blk.keys);
  dvb.middleCols(blk.g * s.d, s.d).topRows(blk.keys).noalias() += probs.transpose() * dctx;
  dsb.noalias() = dctx * vb.middleCols(blk.g * s.d, s.d).topRows(blk.keys).transpose();
  for (int64_t j = 0; j < blk.n; ++j) {
    const float dot = dsb.row(j).dot(probs.row(j));
    dsb.row(j).array() = probs.row(j).array() * (dsb.row(j).array() - dot);
  }
  dqb.block(blk.j0, blk.h * s.d, blk.n, s.d).noalias() =
      s.scale * (dsb * kb.middleCols(blk.g * s.d, s.d).topRows(blk.keys));
  dkb.middleCols(blk.g * s.d, s.d).topRows(blk.keys).noalias() +=
      s.scale * (dsb.transpose() * qb.block(blk.j0, blk.h * s.d, blk.n, s.d));
}

}  // namespace

// Query heads sharing a KV head g accumulate into the same dK/dV columns; without `accumulate` the first
// head of each group clears them.
void attn_bwd(const Op& op, const CpuOpContext& ctx) {
  const View q = view_of(ctx, op.in[0]), k = view_of(ctx, op.in[1]), v = view_of(ctx, op.in[2]);
  const View p = view_of(ctx, op.in[3]), dc = view_of(ctx, op.in[4]);
  const View dq = view_of(ctx, op.out[0]), dk = view_of(ctx, op.out[1]), dv = view_of(ctx, op.out[2]);
  const AttnShape s = attn_shape(op, op.in[3]);
  const int64_t sq = q.seq_rows;
  MatMap ds(scratch(std::min(kQueryBlock, sq) * s.kv_end), std::min(kQueryBlock, sq), s.kv_end,
            Eigen::OuterStride<>(s.kv_end));
  for (int64_t b = 0; b < q.batches(); ++b) {
    const MatMap qb = q.batch(b), kb = k.batch(b), vb = v.batch(b), pb = p.batch(b), dcb = dc.batch(b);
    MatMap dqb = dq.batch(b), dkb = dk.batch(b), dvb = dv.batch(b);
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t g = h / s.group;
      if (!op.attrs.accumulate && h % s.group == 0) {
        dvb.middleCols(g * s.d, s.d).topRows(s.kv_end).setZero();
        dkb.middleCols(g * s.d, s.d).topRows(s.kv_end).setZero();
      }
      for (int64_t j0 = 0; j0 < sq; j0 += kQueryBlock) {
        const int64_t n = std::min(kQueryBlock, sq - j0);
        const int64_t keys = std::min(s.kv_end, q.s0 + j0 + n);
        attn_bwd_block(s, {h, g, j0, n, keys}, qb, kb, vb, pb, dcb, dqb, dkb, dvb, ds);
      }
    }
  }
}

}  // namespace domino::cpu
