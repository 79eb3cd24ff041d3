// cuda_attention.cpp: causal attention as strided-batched cuBLAS GEMMs around the causal softmax kernel.
// Query rows are cut into blocks and each block's GEMMs run over the keys its queries can see only, so the
// masked upper triangle is (mostly) skipped, as a causal kernel does and as the cost model charges. Query
// heads that share a KV head (grouped-query attention) read it in turn: each launch batches over the KV
// heads. With a sliding window a block's GEMMs also skip the keys before its first query's window, and K/V
// may start at a seq k0 > 0 (windowed sequence slices); P's columns stay absolute key positions.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "executor/cuda/cuda_gemm.hpp"
#include "executor/runtime/check.hpp"

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

// Query rows [r0, r1) and the keys [lo, lo + keys) (absolute positions) they see.
struct QueryBlock {
  int64_t r0, r1, lo, keys;
};

// At least 128 rows per block (narrower GEMMs lose more than the skipped keys save) and at most 16 blocks
// (launch count): 16 blocks compute 53 % of the square instead of the triangle's 50 %. Held last block
// first, and that block covers every key, so that a gradient accumulated over blocks starts from a block
// that writes all its rows. A fixed array: attention runs per op and allocates nothing.
constexpr int kMaxQueryBlocks = 16;
struct CausalBlocks {
  std::array<QueryBlock, kMaxQueryBlocks> at{};
  int count = 0;
  const QueryBlock* begin() const { return at.data(); }
  const QueryBlock* end() const { return at.data() + count; }
};

// K/V hold keys [k0, kv_end); the query rows start at position seq0.
struct KeyRange {
  int64_t k0, kv_end, window;
};

CausalBlocks causal_blocks(int64_t sq, int64_t seq0, const KeyRange& kr) {
  const int64_t n = std::clamp<int64_t>((sq + 127) / 128, 1, kMaxQueryBlocks);
  CausalBlocks blocks;
  for (int64_t i = n - 1; i >= 0; --i) {
    const int64_t r0 = i * sq / n, r1 = (i + 1) * sq / n;
    const bool all = i == n - 1;
    const int64_t lo = all || kr.window <= 0 ? kr.k0 : std::max(kr.k0, seq0 + r0 - kr.window + 1);
    const int64_t hi = all ? kr.kv_end : std::min(kr.kv_end, seq0 + r1);
    blocks.at[size_t(blocks.count++)] = QueryBlock{r0, r1, lo, hi - lo};
  }
  return blocks;
}

// One (batch entry, query block, head j of every KV group) of the GEMMs, batched over the KV heads g:
// query head h = g * group + j reads KV head g. Batched this way multi-head attention (group 1) is one
// launch of `heads` GEMMs per block, not one launch per head (launches of a 128 x keys x head_dim GEMM
// each cost more than its arithmetic). Query-side operands (Q, ctx, dctx and their gradients) are
// [rows, heads*d]; key-side ones (K, V, dK, dV) [keys, kv_heads*d]; P-shaped ones (P, dP/dS)
// [rows, heads*key_stride]. The pointers are those of KV group 0; the strides step to the next group.
struct AttnBlock {
  const AttnShape& a;
  QueryBlock qb;
  int j;
  int64_t k0;  // key position of K/V's first row
  int64_t group() const { return a.heads / a.kv_heads; }
  int64_t d() const { return a.head_dim; }
  int64_t rows() const { return qb.r1 - qb.r0; }
  char* query_head(const DevView& v) const { return offset(v.base, qb.r0 * v.row_stride + j * d(), v.elt); }
  int64_t query_stride() const { return group() * d(); }
  char* key_head(const DevView& v) const { return offset(v.base, (qb.lo - k0) * v.row_stride, v.elt); }
  int64_t key_stride() const { return d(); }
  char* p_head(const DevView& v) const {
    return offset(v.base, qb.r0 * v.row_stride + j * a.key_stride + qb.lo, v.elt);
  }
  int64_t p_stride() const { return group() * a.key_stride; }
};

// out_h = alpha * X_h Y_g^T: P-shaped over the visible keys (the scores from Q and K, scaled in the GEMM so
// that fp16 scores stay sqrt(d) smaller; dP from dctx and V).
void head_scores(void* h, const AttnBlock& t, const DevView& x, const DevView& y, const DevView& out,
                 float alpha) {
  GemmArgs sc;
  sc.trans_b = true;
  sc.alpha = alpha;
  sc.m = t.rows(), sc.n = t.qb.keys, sc.k = t.d();
  sc.a = t.query_head(x), sc.lda = x.row_stride, sc.stride_a = t.query_stride();
  sc.b = t.key_head(y), sc.ldb = y.row_stride, sc.stride_b = t.key_stride();
  sc.c = t.p_head(out), sc.ldc = out.row_stride, sc.stride_c = t.p_stride();
  sc.batch = t.a.kv_heads, sc.elt = x.elt;
  gemm(h, sc);
}

// out_h = P_h Y_g over the visible keys, query-shaped (the context from P and V; dQ from dS and K).
void head_context(void* h, const AttnBlock& t, const DevView& pm, const DevView& y, const DevView& out) {
  GemmArgs pv;
  pv.m = t.rows(), pv.n = t.d(), pv.k = t.qb.keys;
  pv.a = t.p_head(pm), pv.lda = pm.row_stride, pv.stride_a = t.p_stride();
  pv.b = t.key_head(y), pv.ldb = y.row_stride, pv.stride_b = t.key_stride();
  pv.c = t.query_head(out), pv.ldc = out.row_stride, pv.stride_c = t.query_stride();
  pv.batch = t.a.kv_heads, pv.elt = pm.elt;
  gemm(h, pv);
}

// out_g (+)= P_h^T X_h, key-shaped (dV from P and dctx; dK from dS and Q). A group's heads write the same
// output, so they take turns (j = 0 writes "=" when overwriting); the batch runs over the groups.
void key_grad(void* h, const AttnBlock& t, const DevView& pm, const DevView& x, const DevView& out,
              bool overwrite) {
  GemmArgs kg;
  kg.trans_a = true;
  kg.m = t.qb.keys, kg.n = t.d(), kg.k = t.rows();
  kg.a = t.p_head(pm), kg.lda = pm.row_stride, kg.stride_a = t.p_stride();
  kg.b = t.query_head(x), kg.ldb = x.row_stride, kg.stride_b = t.query_stride();
  kg.c = t.key_head(out), kg.ldc = out.row_stride, kg.stride_c = t.key_stride();
  kg.beta = (overwrite && t.j == 0) ? 0.f : 1.f, kg.elt = pm.elt;
  kg.batch = t.a.kv_heads;
  gemm(h, kg);
}

// Backward operands of one batch entry: dS is computed in place in dp (row stride ld_dp).
struct AttnBwdViews {
  DevView q, k, v, p, dctx, dq, dk, dv, dp;
};

// Zeroes the first `rows` rows of a key-shaped view of one batch entry (the rows an accumulating backward
// writes "=").
void zero_key_rows(const DevView& v, int64_t rows, StreamHandle s) {
  if (rows <= 0) return;
  const size_t eb = size_t(elt_bytes(v.elt));
  DOMINO_CUDA_CHECK(cudaMemset2DAsync(v.base, size_t(v.row_stride) * eb, 0, size_t(v.ncols) * eb, size_t(rows),
                                      static_cast<cudaStream_t>(s)));
}

KeyRange key_range(const DevView& k, const AttnShape& a) {
  return KeyRange{k.seq0, k.seq0 + k.rows_per_batch, a.window};
}

}  // namespace

void attention_fwd(void* h, StreamHandle s, const AttentionFwdArgs& args) {
  const DevView &q = args.q, &k = args.k, &v = args.v, &p = args.p, &ctx = args.ctx;
  const AttnShape& a = args.shape;
  const int64_t sq = q.rows_per_batch;
  const KeyRange kr = key_range(k, a);
  const float scale = 1.f / std::sqrt(float(a.head_dim));
  const CausalBlocks blocks = causal_blocks(sq, q.seq0, kr);
  for (int64_t b = 0; b < q.nbatch; ++b) {
    const DevView qb = block(q, b), kb = block(k, b), vb = block(v, b), pb = block(p, b), cb = block(ctx, b);
    for (const QueryBlock& r : blocks) {
      for (int j = 0; j < a.heads / a.kv_heads; ++j)
        head_scores(h, AttnBlock{a, r, j, kr.k0}, qb, kb, pb, scale);
    }
    // Reads only the keys of each row's window, all inside the columns its block computed.
    causal_softmax_fwd(pb, SoftmaxShape{a.heads, a.key_stride, kr.kv_end, 1.f, a.window}, s);
    for (const QueryBlock& r : blocks) {
      for (int j = 0; j < a.heads / a.kv_heads; ++j) head_context(h, AttnBlock{a, r, j, kr.k0}, pb, vb, cb);
    }
  }
}

void attention_bwd(void* h, StreamHandle s, const AttentionBwdArgs& args) {
  const AttnShape& a = args.shape;
  const DevView& q = args.q;
  const int64_t sq = q.rows_per_batch;
  const KeyRange kr = key_range(args.k, a);
  const int64_t ld_dp = int64_t(a.heads) * a.key_stride;
  const float scale = 1.f / std::sqrt(float(a.head_dim));
  const CausalBlocks blocks = causal_blocks(sq, q.seq0, kr);
  // Accumulating with a window: the keys below overwrite_end are written "=" (zeroed first).
  const int64_t fresh = args.accumulate ? std::clamp<int64_t>(args.overwrite_end - kr.k0, 0, kr.kv_end - kr.k0) : 0;
  for (int64_t b = 0; b < q.nbatch; ++b) {
    AttnBwdViews w{block(q, b),         block(args.k, b),  block(args.v, b),  block(args.p, b),
                   block(args.dctx, b), block(args.dq, b), block(args.dk, b), block(args.dv, b),
                   DevView{args.dp_scratch, q.elt, ld_dp, sq * ld_dp, sq, 1, ld_dp, q.seq0}};
    zero_key_rows(w.dk, fresh, s);
    zero_key_rows(w.dv, fresh, s);
    // The first block (the last query rows) sees every key, so it alone decides overwrite vs accumulate.
    for (int i = 0; i < blocks.count; ++i) {
      const bool overwrite = i == 0 && !args.accumulate;
      for (int j = 0; j < a.heads / a.kv_heads; ++j) {
        const AttnBlock t{a, blocks.at[size_t(i)], j, kr.k0};
        head_scores(h, t, w.dctx, w.v, w.dp, 1.f);     // dP_h = dctx_h V_g^T
        key_grad(h, t, w.p, w.dctx, w.dv, overwrite);  // dV_g (+)= sum_h P_h^T dctx_h
      }
    }
    causal_softmax_bwd(w.p, w.dp, SoftmaxShape{a.heads, a.key_stride, kr.kv_end, scale, a.window}, s);
    for (int i = 0; i < blocks.count; ++i) {
      const bool overwrite = i == 0 && !args.accumulate;
      for (int j = 0; j < a.heads / a.kv_heads; ++j) {
        const AttnBlock t{a, blocks.at[size_t(i)], j, kr.k0};
        head_context(h, t, w.dp, w.k, w.dq);         // dQ_h = dS_h K_g
        key_grad(h, t, w.dp, w.q, w.dk, overwrite);  // dK_g (+)= sum_h dS_h^T Q_h
      }
    }
  }
}

}  // namespace domino::cuda
