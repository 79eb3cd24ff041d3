// cuda_attention.cpp: causal attention as strided-batched cuBLAS GEMMs around the causal softmax kernel.
// Query rows are cut into blocks and each block's GEMMs run over the keys its queries can see only, so the
// masked upper triangle is (mostly) skipped, as a causal kernel does and as the cost model charges. Query
// heads that share a KV head (grouped-query attention) form one batch with a zero stride on K and V.
#include <algorithm>
#include <cmath>
#include <vector>

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

// Query rows [r0, r1) and the keys [0, keys) they see.
struct QueryBlock {
  int64_t r0, r1, keys;
};

// At least 128 rows per block (narrower GEMMs lose more than the skipped keys save) and at most 16 blocks
// (launch count): 16 blocks compute 53 % of the square instead of the triangle's 50 %. Returned last block
// first, and that block covers every key, so that a gradient accumulated over blocks starts from a block
// that writes all its rows.
std::vector<QueryBlock> causal_blocks(int64_t sq, int64_t seq0, int64_t nk) {
  const int64_t n = std::clamp<int64_t>((sq + 127) / 128, 1, 16);
  std::vector<QueryBlock> blocks;
  for (int64_t i = n - 1; i >= 0; --i) {
    const int64_t r0 = i * sq / n, r1 = (i + 1) * sq / n;
    const int64_t keys = i == n - 1 ? nk : std::min(nk, seq0 + r1);
    blocks.push_back(QueryBlock{r0, r1, keys});
  }
  return blocks;
}

// The operands of one (batch entry, query block) shared by the per-head-group GEMMs.
struct AttnBlock {
  const AttnShape& a;
  QueryBlock qb;
  int group;
  int64_t d;
};

// scores_h = scale * Q_h K_g^T: scaled in the GEMM, so fp16 scores stay sqrt(d) smaller.
void scores_fwd(void* h, const AttnBlock& t, const DevView& q, const DevView& k, const DevView& p, int g) {
  const int64_t h0 = int64_t(g) * t.group, d = t.d;
  GemmArgs sc;
  sc.trans_b = true;
  sc.alpha = 1.f / std::sqrt(float(d));
  sc.m = t.qb.r1 - t.qb.r0, sc.n = t.qb.keys, sc.k = d;
  sc.a = offset(q.base, t.qb.r0 * q.row_stride + h0 * d, q.elt), sc.lda = q.row_stride, sc.stride_a = d;
  sc.b = offset(k.base, g * d, k.elt), sc.ldb = k.row_stride, sc.stride_b = 0;
  sc.c = offset(p.base, t.qb.r0 * p.row_stride + h0 * t.a.key_stride, p.elt), sc.ldc = p.row_stride;
  sc.stride_c = t.a.key_stride, sc.batch = t.group, sc.elt = q.elt;
  gemm(h, sc);
}

// ctx_h = P_h V_g over the visible keys.
void context_fwd(void* h, const AttnBlock& t, const DevView& p, const DevView& v, const DevView& ctx, int g) {
  const int64_t h0 = int64_t(g) * t.group, d = t.d;
  GemmArgs pv;
  pv.m = t.qb.r1 - t.qb.r0, pv.n = d, pv.k = t.qb.keys;
  pv.a = offset(p.base, t.qb.r0 * p.row_stride + h0 * t.a.key_stride, p.elt), pv.lda = p.row_stride;
  pv.stride_a = t.a.key_stride;
  pv.b = offset(v.base, g * d, v.elt), pv.ldb = v.row_stride, pv.stride_b = 0;
  pv.c = offset(ctx.base, t.qb.r0 * ctx.row_stride + h0 * d, ctx.elt), pv.ldc = ctx.row_stride, pv.stride_c = d;
  pv.batch = t.group, pv.elt = p.elt;
  gemm(h, pv);
}

// Backward operands of one batch entry: dS is computed in place in dp (row stride ld_dp).
struct AttnBwdViews {
  DevView q, k, v, p, dctx, dq, dk, dv, dp;
};

// dP_h = dctx_h V_g^T, then dV_g (+)= sum_h P_h^T dctx_h (one head at a time: the same output).
void values_bwd(void* h, const AttnBlock& t, const AttnBwdViews& w, int g, bool overwrite) {
  const int64_t h0 = int64_t(g) * t.group, d = t.d, rows = t.qb.r1 - t.qb.r0, r0 = t.qb.r0;
  const AttnShape& a = t.a;
  const Elt e = w.q.elt;
  GemmArgs dpa;
  dpa.trans_b = true;
  dpa.m = rows, dpa.n = t.qb.keys, dpa.k = d;
  dpa.a = offset(w.dctx.base, r0 * w.dctx.row_stride + h0 * d, e), dpa.lda = w.dctx.row_stride, dpa.stride_a = d;
  dpa.b = offset(w.v.base, g * d, e), dpa.ldb = w.v.row_stride, dpa.stride_b = 0;
  dpa.c = offset(w.dp.base, r0 * w.dp.row_stride + h0 * a.key_stride, e), dpa.ldc = w.dp.row_stride;
  dpa.stride_c = a.key_stride, dpa.batch = t.group, dpa.elt = e;
  gemm(h, dpa);
  for (int j = 0; j < t.group; ++j) {
    GemmArgs dv;
    dv.trans_a = true;
    dv.m = t.qb.keys, dv.n = d, dv.k = rows;
    dv.a = offset(w.p.base, r0 * w.p.row_stride + (h0 + j) * a.key_stride, e), dv.lda = w.p.row_stride;
    dv.b = offset(w.dctx.base, r0 * w.dctx.row_stride + (h0 + j) * d, e), dv.ldb = w.dctx.row_stride;
    dv.c = offset(w.dv.base, g * d, e), dv.ldc = w.dv.row_stride;
    dv.beta = (overwrite && j == 0) ? 0.f : 1.f, dv.elt = e;
    gemm(h, dv);
  }
}

// dQ_h = dS_h K_g, then dK_g (+)= sum_h dS_h^T Q_h.
void queries_keys_bwd(void* h, const AttnBlock& t, const AttnBwdViews& w, int g, bool overwrite) {
  const int64_t h0 = int64_t(g) * t.group, d = t.d, rows = t.qb.r1 - t.qb.r0, r0 = t.qb.r0;
  const AttnShape& a = t.a;
  const Elt e = w.q.elt;
  GemmArgs dqa;
  dqa.m = rows, dqa.n = d, dqa.k = t.qb.keys;
  dqa.a = offset(w.dp.base, r0 * w.dp.row_stride + h0 * a.key_stride, e), dqa.lda = w.dp.row_stride;
  dqa.stride_a = a.key_stride;
  dqa.b = offset(w.k.base, g * d, e), dqa.ldb = w.k.row_stride, dqa.stride_b = 0;
  dqa.c = offset(w.dq.base, r0 * w.dq.row_stride + h0 * d, e), dqa.ldc = w.dq.row_stride, dqa.stride_c = d;
  dqa.batch = t.group, dqa.elt = e;
  gemm(h, dqa);
  for (int j = 0; j < t.group; ++j) {
    GemmArgs dk;
    dk.trans_a = true;
    dk.m = t.qb.keys, dk.n = d, dk.k = rows;
    dk.a = offset(w.dp.base, r0 * w.dp.row_stride + (h0 + j) * a.key_stride, e), dk.lda = w.dp.row_stride;
    dk.b = offset(w.q.base, r0 * w.q.row_stride + (h0 + j) * d, e), dk.ldb = w.q.row_stride;
    dk.c = offset(w.dk.base, g * d, e), dk.ldc = w.dk.row_stride;
    dk.beta = (overwrite && j == 0) ? 0.f : 1.f, dk.elt = e;
    gemm(h, dk);
  }
}

}  // namespace

void attention_fwd(void* h, StreamHandle s, const AttentionFwdArgs& args) {
  const DevView &q = args.q, &k = args.k, &v = args.v, &p = args.p, &ctx = args.ctx;
  const AttnShape& a = args.shape;
  const int group = a.heads / a.kv_heads;
  const int64_t sq = q.rows_per_batch, nk = k.rows_per_batch;
  const std::vector<QueryBlock> blocks = causal_blocks(sq, q.seq0, nk);
  for (int64_t b = 0; b < q.nbatch; ++b) {
    const DevView qb = block(q, b), kb = block(k, b), vb = block(v, b), pb = block(p, b), cb = block(ctx, b);
    for (const QueryBlock& r : blocks) {
      for (int g = 0; g < a.kv_heads; ++g) scores_fwd(h, AttnBlock{a, r, group, a.head_dim}, qb, kb, pb, g);
    }
    // Reads only the keys [0, position] of each row, all inside the columns its block computed.
    causal_softmax_fwd(pb, SoftmaxShape{a.heads, a.key_stride, nk, 1.f}, s);
    for (const QueryBlock& r : blocks) {
      for (int g = 0; g < a.kv_heads; ++g) context_fwd(h, AttnBlock{a, r, group, a.head_dim}, pb, vb, cb, g);
    }
  }
}

void attention_bwd(void* h, StreamHandle s, const AttentionBwdArgs& args) {
  const AttnShape& a = args.shape;
  const int group = a.heads / a.kv_heads;
  const DevView& q = args.q;
  const int64_t sq = q.rows_per_batch, nk = args.k.rows_per_batch;
  const int64_t ld_dp = int64_t(a.heads) * a.key_stride;
  const float scale = 1.f / std::sqrt(float(a.head_dim));
  const std::vector<QueryBlock> blocks = causal_blocks(sq, q.seq0, nk);
  for (int64_t b = 0; b < q.nbatch; ++b) {
    AttnBwdViews w{block(q, b),         block(args.k, b),  block(args.v, b),  block(args.p, b),
                   block(args.dctx, b), block(args.dq, b), block(args.dk, b), block(args.dv, b),
                   DevView{args.dp_scratch, q.elt, ld_dp, sq * ld_dp, sq, 1, ld_dp, q.seq0}};
    // The first block (the last query rows) sees every key, so it alone decides overwrite vs accumulate.
    for (size_t i = 0; i < blocks.size(); ++i) {
      const bool overwrite = i == 0 && !args.accumulate;
      for (int g = 0; g < a.kv_heads; ++g) values_bwd(h, AttnBlock{a, blocks[i], group, a.head_dim}, w, g, overwrite);
    }
    causal_softmax_bwd(w.p, w.dp, SoftmaxShape{a.heads, a.key_stride, nk, scale}, s);
    for (size_t i = 0; i < blocks.size(); ++i) {
      const bool overwrite = i == 0 && !args.accumulate;
      for (int g = 0; g < a.kv_heads; ++g) {
        queries_keys_bwd(h, AttnBlock{a, blocks[i], group, a.head_dim}, w, g, overwrite);
      }
    }
  }
}

}  // namespace domino::cuda
