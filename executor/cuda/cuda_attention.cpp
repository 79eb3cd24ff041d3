// cuda_attention.cpp: attention as strided-batched cuBLAS GEMMs around the causal softmax kernel. Query
// heads that share a KV head (grouped-query attention) form one batch with a zero stride on K and V.
#include <cmath>

#include "executor/cuda/cuda_gemm.hpp"

namespace domino::cuda {
namespace {

char* offset(const void* base, int64_t elements, Elt e) {
  return static_cast<char*>(const_cast<void*>(base)) + elements * elt_bytes(e);
}

// The rows of batch entry b of a view, as a view of its own.
DevView block(const DevView& v, int64_t b) {
  DevView out = v;
  out.base = offset(v.base, b * v.batch_stride, v.elt);
  out.nbatch = 1;
  return out;
}

}  // namespace

void attention_fwd(void* h, StreamHandle s, const AttentionFwdArgs& args) {
  const DevView &q = args.q, &k = args.k, &v = args.v, &p = args.p, &ctx = args.ctx;
  const AttnShape& a = args.shape;
  const int group = a.heads / a.kv_heads;
  const int64_t d = a.head_dim, sq = q.rows_per_batch, nk = k.rows_per_batch;
  const float scale = 1.f / std::sqrt(float(d));
  for (int64_t b = 0; b < q.nbatch; ++b) {
    const DevView qb = block(q, b), kb = block(k, b), vb = block(v, b), pb = block(p, b), cb = block(ctx, b);
    for (int g = 0; g < a.kv_heads; ++g) {
      const int64_t h0 = int64_t(g) * group;
      GemmArgs sc;  // scores_h = scale * Q_h K_g^T: scaled in the GEMM, so fp16 scores stay sqrt(d) smaller
      sc.trans_b = true;
      sc.alpha = scale;
      sc.m = sq, sc.n = nk, sc.k = d;
      sc.a = offset(qb.base, h0 * d, q.elt), sc.lda = q.row_stride, sc.stride_a = d;
      sc.b = offset(kb.base, g * d, k.elt), sc.ldb = k.row_stride, sc.stride_b = 0;
      sc.c = offset(pb.base, h0 * a.key_stride, p.elt), sc.ldc = p.row_stride, sc.stride_c = a.key_stride;
      sc.batch = group, sc.elt = q.elt;
      gemm(h, sc);
    }
    causal_softmax_fwd(pb, SoftmaxShape{a.heads, a.key_stride, nk, 1.f}, s);
    for (int g = 0; g < a.kv_heads; ++g) {
      const int64_t h0 = int64_t(g) * group;
      GemmArgs pv;  // ctx_h = P_h V_g
      pv.m = sq, pv.n = d, pv.k = nk;
      pv.a = offset(pb.base, h0 * a.key_stride, p.elt), pv.lda = p.row_stride, pv.stride_a = a.key_stride;
      pv.b = offset(vb.base, g * d, v.elt), pv.ldb = v.row_stride, pv.stride_b = 0;
      pv.c = offset(cb.base, h0 * d, ctx.elt), pv.ldc = ctx.row_stride, pv.stride_c = d;
      pv.batch = group, pv.elt = q.elt;
      gemm(h, pv);
    }
  }
}

void attention_bwd(void* h, StreamHandle s, const AttentionBwdArgs& args) {
  const DevView &q = args.q, &k = args.k, &v = args.v, &p = args.p, &dctx = args.dctx;
  const DevView &dq = args.dq, &dk = args.dk, &dv = args.dv;
  const bool accumulate = args.accumulate;
  const AttnShape& a = args.shape;
  void* dp_scratch = args.dp_scratch;
  const int group = a.heads / a.kv_heads;
  const int64_t d = a.head_dim, sq = q.rows_per_batch, nk = k.rows_per_batch;
  const int64_t ld_dp = int64_t(a.heads) * a.key_stride;
  const float scale = 1.f / std::sqrt(float(d));
  DevView dp{dp_scratch, q.elt, ld_dp, sq * ld_dp, sq, 1, ld_dp, q.seq0};
  for (int64_t b = 0; b < q.nbatch; ++b) {
    const DevView qb = block(q, b), kb = block(k, b), vb = block(v, b), pb = block(p, b);
    const DevView dcb = block(dctx, b), dqb = block(dq, b), dkb = block(dk, b), dvb = block(dv, b);
    dp.seq0 = qb.seq0;
    for (int g = 0; g < a.kv_heads; ++g) {
      const int64_t h0 = int64_t(g) * group;
      GemmArgs dpa;  // dP_h = dctx_h V_g^T
      dpa.trans_b = true;
      dpa.m = sq, dpa.n = nk, dpa.k = d;
      dpa.a = offset(dcb.base, h0 * d, q.elt), dpa.lda = dctx.row_stride, dpa.stride_a = d;
      dpa.b = offset(vb.base, g * d, q.elt), dpa.ldb = v.row_stride, dpa.stride_b = 0;
      dpa.c = offset(dp_scratch, h0 * a.key_stride, q.elt), dpa.ldc = ld_dp, dpa.stride_c = a.key_stride;
      dpa.batch = group, dpa.elt = q.elt;
      gemm(h, dpa);
      for (int j = 0; j < group; ++j) {  // dV_g (+)= sum_h P_h^T dctx_h: same output, so one at a time
        GemmArgs w;
        w.trans_a = true;
        w.m = nk, w.n = d, w.k = sq;
        w.a = offset(pb.base, (h0 + j) * a.key_stride, q.elt), w.lda = p.row_stride;
        w.b = offset(dcb.base, (h0 + j) * d, q.elt), w.ldb = dctx.row_stride;
        w.c = offset(dvb.base, g * d, q.elt), w.ldc = dv.row_stride;
        w.beta = (accumulate || j > 0) ? 1.f : 0.f, w.elt = q.elt;
        gemm(h, w);
      }
    }
    causal_softmax_bwd(pb, dp, SoftmaxShape{a.heads, a.key_stride, nk, scale}, s);
    for (int g = 0; g < a.kv_heads; ++g) {
      const int64_t h0 = int64_t(g) * group;
      GemmArgs dqa;  // dQ_h = dS_h K_g
      dqa.m = sq, dqa.n = d, dqa.k = nk;
      dqa.a = offset(dp_scratch, h0 * a.key_stride, q.elt), dqa.lda = ld_dp, dqa.stride_a = a.key_stride;
      dqa.b = offset(kb.base, g * d, q.elt), dqa.ldb = k.row_stride, dqa.stride_b = 0;
      dqa.c = offset(dqb.base, h0 * d, q.elt), dqa.ldc = dq.row_stride, dqa.stride_c = d;
      dqa.batch = group, dqa.elt = q.elt;
      gemm(h, dqa);
      for (int j = 0; j < group; ++j) {  // dK_g (+)= sum_h dS_h^T Q_h
        GemmArgs w;
        w.trans_a = true;
        w.m = nk, w.n = d, w.k = sq;
        w.a = offset(dp_scratch, (h0 + j) * a.key_stride, q.elt), w.lda = ld_dp;
        w.b = offset(qb.base, (h0 + j) * d, q.elt), w.ldb = q.row_stride;
        w.c = offset(dkb.base, g * d, q.elt), w.ldc = dk.row_stride;
        w.beta = (accumulate || j > 0) ? 1.f : 0.f, w.elt = q.elt;
        gemm(h, w);
      }
    }
  }
}

}  // namespace domino::cuda
