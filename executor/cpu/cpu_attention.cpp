// cpu_attention.cpp: causal (grouped-query) attention for the query rows of one slice, per batch entry
// and head: scores straight into the probabilities region, softmax in place, then context = P · V.
// The backward recomputes nothing but dP = dctx · V^T (per-thread scratch) and uses the stored P.
// Like a causal GPU kernel, both passes work in blocks of query rows and skip the key blocks above the
// diagonal: a block of queries ending at position e touches keys [0, e] only (the IR charges the same work).
// With a sliding window w a block starting at position s also skips the keys before s - w + 1. K/V may
// start at a seq k0 > 0 (windowed slices); P's columns stay absolute key positions.
#include "executor/cpu/cpu_views.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>

namespace domino::cpu {
namespace {

struct AttnShape {
  int64_t heads, group, d, kv_end, probs_stride;  // probs_stride: columns per head in P (seq_len)
  int64_t k0, window;                             // K/V's first seq position; the sliding window (0: none)
  float scale;
  // Keys [lo, hi) the query positions [first, last] see, all of them inside K/V.
  int64_t lo(int64_t first) const { return window > 0 ? std::max(k0, first - window + 1) : k0; }
  int64_t hi(int64_t last) const { return std::min(kv_end, last + 1); }
};

AttnShape attn_shape(const Op& op, const Region& p) {
  AttnShape s;
  s.heads = op.attrs.heads;
  s.group = op.attrs.heads / op.attrs.kv_heads;
  s.d = op.attrs.head_dim;
  s.kv_end = op.in[1].s1;
  s.k0 = op.in[1].s0;
  s.window = op.attrs.window;
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
        const int64_t lo = s.lo(q.s0 + j0), hi = s.hi(q.s0 + j0 + n - 1);  // keys the block's queries see
        auto scores = pb.block(j0, h * L + lo, n, hi - lo);
        const auto keys = kb.middleCols(g * s.d, s.d).middleRows(lo - s.k0, hi - lo);
        scores.noalias() = s.scale * (qb.block(j0, h * s.d, n, s.d) * keys.transpose());
        for (int64_t j = j0; j < j0 + n; ++j) {
          const int64_t pos = q.s0 + j, first = s.lo(pos);  // the query sees keys [first, pos]
          ArrayRowMap row(pb.row(j).data() + h * L, L);
          auto live = row.segment(first, pos + 1 - first);
          live = (live - live.maxCoeff()).exp();
          live /= live.sum();
          row.head(first).setZero();
          row.tail(L - pos - 1).setZero();
        }
        cb.block(j0, h * s.d, n, s.d).noalias() = scores * vb.middleCols(g * s.d, s.d).middleRows(lo - s.k0, hi - lo);
      }
    }
  }
}

namespace {

// One block of query rows [j0, j0 + n) of head h in the backward, over the keys [lo, hi) they see.
struct AttnBwdBlock {
  int64_t h, g, j0, n, lo, hi;
};

// dV_g += P^T dC; dP = dC V^T; dS = P ∘ (dP - rowsum(P ∘ dP)); dQ = scale dS K; dK_g += scale dS^T Q.
void attn_bwd_block(const AttnShape& s, const AttnBwdBlock& blk, const MatMap& qb, const MatMap& kb,
                    const MatMap& vb, const MatMap& pb, const MatMap& dcb, MatMap& dqb, MatMap& dkb, MatMap& dvb,
                    MatMap& ds) {
  const int64_t L = s.probs_stride, nk = blk.hi - blk.lo, r0 = blk.lo - s.k0;
  const auto probs = pb.block(blk.j0, blk.h * L + blk.lo, blk.n, nk);
  const auto dctx = dcb.block(blk.j0, blk.h * s.d, blk.n, s.d);
  auto dsb = ds.topLeftCorner(blk.n, nk);
  dvb.middleCols(blk.g * s.d, s.d).middleRows(r0, nk).noalias() += probs.transpose() * dctx;
  dsb.noalias() = dctx * vb.middleCols(blk.g * s.d, s.d).middleRows(r0, nk).transpose();
  for (int64_t j = 0; j < blk.n; ++j) {
    const float dot = dsb.row(j).dot(probs.row(j));
    dsb.row(j).array() = probs.row(j).array() * (dsb.row(j).array() - dot);
  }
  dqb.block(blk.j0, blk.h * s.d, blk.n, s.d).noalias() =
      s.scale * (dsb * kb.middleCols(blk.g * s.d, s.d).middleRows(r0, nk));
  dkb.middleCols(blk.g * s.d, s.d).middleRows(r0, nk).noalias() +=
      s.scale * (dsb.transpose() * qb.block(blk.j0, blk.h * s.d, blk.n, s.d));
}

}  // namespace

// Query heads sharing a KV head g accumulate into the same dK/dV columns; the first head of each group
// clears the rows written "=": all of them without `accumulate`, else those below overwrite_end.
void attn_bwd(const Op& op, const CpuOpContext& ctx) {
  const View q = view_of(ctx, op.in[0]), k = view_of(ctx, op.in[1]), v = view_of(ctx, op.in[2]);
  const View p = view_of(ctx, op.in[3]), dc = view_of(ctx, op.in[4]);
  const View dq = view_of(ctx, op.out[0]), dk = view_of(ctx, op.out[1]), dv = view_of(ctx, op.out[2]);
  const AttnShape s = attn_shape(op, op.in[3]);
  const int64_t sq = q.seq_rows, nk = s.kv_end - s.k0;
  const int64_t fresh = op.attrs.accumulate ? std::clamp<int64_t>(op.attrs.overwrite_end - s.k0, 0, nk) : nk;
  MatMap ds(scratch(std::min(kQueryBlock, sq) * nk), std::min(kQueryBlock, sq), nk, Eigen::OuterStride<>(nk));
  for (int64_t b = 0; b < q.batches(); ++b) {
    const MatMap qb = q.batch(b), kb = k.batch(b), vb = v.batch(b), pb = p.batch(b), dcb = dc.batch(b);
    MatMap dqb = dq.batch(b), dkb = dk.batch(b), dvb = dv.batch(b);
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t g = h / s.group;
      if (h % s.group == 0) {
        dvb.middleCols(g * s.d, s.d).topRows(fresh).setZero();
        dkb.middleCols(g * s.d, s.d).topRows(fresh).setZero();
      }
      for (int64_t j0 = 0; j0 < sq; j0 += kQueryBlock) {
        const int64_t n = std::min(kQueryBlock, sq - j0);
        attn_bwd_block(s, {h, g, j0, n, s.lo(q.s0 + j0), s.hi(q.s0 + j0 + n - 1)}, qb, kb, vb, pb, dcb, dqb, dkb,
                       dvb, ds);
      }
    }
  }
}

}  // namespace domino::cpu
