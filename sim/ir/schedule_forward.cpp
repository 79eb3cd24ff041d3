// schedule_forward.cpp: forward ops in program order. Each block runs its slices as a pipeline
// F0, F1, R0, F2, R1, ..., R(p-1), where F_i is the slice's compute up to its AllReduce launches and R_i
// its residual adds; that order is what lets slice i's AllReduce run behind slice i+1's compute. With
// inter-layer overlap the last R is emitted after the next block's F0, when their rows are disjoint.
#include "sim/ir/schedule_builder_internal.hpp"

namespace domino::detail {

void Builder::forward() {
  embedding_forward();
  const int L = m_.layers;
  for (int l = 0; l < L; ++l) {
    forward_block(l, Block::Attn, &plan_.layers[size_t(l)].mlp);
    forward_block(l, Block::Mlp, l + 1 < L ? &plan_.layers[size_t(l + 1)].attn : nullptr);
  }
  flush_deferred_forward();
  // Head: needs every row, so nothing crosses into it.
  head_forward(L > 0 ? lb_[size_t(L - 1)].x_out : gb_.x0);
}

void Builder::forward_block(int l, Block block, const BlockPlan* next_plan) {
  const BlockPlan& bp = block_plan(l, block);
  for (int i = 0; i < bp.p; ++i) {
    if (block == Block::Attn) {
      fwd_attn_front(l, i);
    } else {
      fwd_mlp_front(l, i);
    }
    if (i == 0) flush_deferred_forward();
    if (i > 0) fwd_residual(l, block, i - 1);
  }
  const bool defer = bp.overlap == OverlapMode::Inter && next_plan != nullptr &&
                     !slice_box(bp, bp.p - 1).intersects(slice_box(*next_plan, 0));
  if (defer) {
    deferred_ = Deferred{true, l, block, bp.p - 1};
  } else {
    fwd_residual(l, block, bp.p - 1);
  }
}

void Builder::fwd_attn_front(int l, int i) {
  fwd_norm_column_gemm(l, Block::Attn, i);
  const Box box = slice_box(plan_.layers[size_t(l)].attn, i);
  const LayerBuffers& b = lb_[size_t(l)];
  const Block A = Block::Attn;
  const int64_t k_end = (a_l_ + kv_l_) * d_;  // end of the key columns: rope turns queries and keys
  if (llama_) {
    Op& op = emit(l, Phase::Forward, A, "rope", i, -1, OpCode::RopeFwd);
    in(op, rows(b.qkv, box, 0, k_end));
    out(op, rows(b.qkv, box, 0, k_end));
    op.attrs.heads = int16_t(a_l_ + kv_l_), op.attrs.head_dim = int16_t(d_);
  }
  {
    // Causal: the slice's queries see keys [0, its last position], from this and all earlier slices.
    const Box keys{box.b0, box.b1, 0, box.s1};
    Op& op = emit(l, Phase::Forward, A, "core", i, -1, OpCode::AttnFwd);
    qkv_operands(op, b.qkv, box, keys, false);
    out(op, rows(b.ctx, box));
    out(op, rows(b.probs, box));
    op.attrs.heads = int16_t(a_l_), op.attrs.kv_heads = int16_t(kv_l_), op.attrs.head_dim = int16_t(d_);
    // QK^T and PV over the (query, key) pairs a causal kernel computes.
    op.flops = 4.0 * causal_pairs(box) * double(d_) * double(a_l_);
  }
  fwd_row_parallel_gemm(l, A, i, "proj", b.ctx, b.param[ProjW], a_l_ * d_);
}

void Builder::fwd_mlp_front(int l, int i) {
  fwd_norm_column_gemm(l, Block::Mlp, i);
  const Box box = slice_box(plan_.layers[size_t(l)].mlp, i);
  const LayerBuffers& b = lb_[size_t(l)];
  const Block M = Block::Mlp;
  {
    Op& op = emit(l, Phase::Forward, M, "act", i, -1, swiglu_ ? OpCode::SwigluFwd : OpCode::GeluFwd);
    in(op, rows(b.hpre, box));
    out(op, rows(b.act, box));
  }
  fwd_row_parallel_gemm(l, M, i, "fc2", b.act, b.param[Fc2W], f_l_);
}

// The block's first two ops on slice i: the norm, then the column-parallel GEMM that reads its output.
void Builder::fwd_norm_column_gemm(int l, Block block, int i) {
  const Box box = slice_box(block_plan(l, block), i);
  const LayerBuffers& b = lb_[size_t(l)];
  const NormColumnGemm a =
      block == Block::Attn
          ? NormColumnGemm{b.x_in, b.param[N1G], b.param[N1B], b.xn1, b.st1, "qkv", b.param[QkvW], b.param[QkvB],
                           b.qkv, qkv_cols_}
          : NormColumnGemm{b.x_mid, b.param[N2G], b.param[N2B], b.xn2, b.st2, "fc1", b.param[Fc1W],
                           b.param[Fc1B], b.hpre, fc1_cols_};
  {
    Op& op = emit(l, Phase::Forward, block, "norm", i, -1, rms_ ? OpCode::RmsNormFwd : OpCode::LayerNormFwd);
    in(op, rows(a.x, box));
    in(op, whole(a.gamma));
    if (layernorm_) in(op, whole(a.beta));
    out(op, rows(a.xn, box));
    out(op, rows(a.stats, box));
  }
  Op& op = emit(l, Phase::Forward, block, a.gemm, i, -1, OpCode::MatMul);
  in(op, rows(a.xn, box));
  in(op, whole(a.weight));
  if (bias_) in(op, whole(a.bias));
  out(op, rows(a.y, box));
  op.m = box.rows(), op.k = h_, op.n = a.cols;
}

// The row-parallel GEMM of slice i into its partial sums, one per column chunk, each followed by its
// AllReduce on the communication stream (blocking when the block does not overlap).
void Builder::fwd_row_parallel_gemm(int l, Block block, int i, const char* name, int32_t x, int32_t w, int64_t k) {
  const BlockPlan& bp = block_plan(l, block);
  const Box box = slice_box(bp, i);
  const int64_t cw = h_ / bp.q;
  for (int c = 0; c < bp.q; ++c) {
    const int chunk = bp.q > 1 ? c : -1;
    const int32_t ps = partial_buffer(false, block, l, bp, i, c);
    {
      Op& op = emit(l, Phase::Forward, block, name, i, chunk, OpCode::MatMul);
      in(op, rows(x, box));
      in(op, weight(w, 0, k, c * cw, (c + 1) * cw));
      out(op, whole(ps));
      op.m = box.rows(), op.k = k, op.n = cw;
    }
    if (plan_.comm_enabled) {
      Op& op = emit(l, Phase::Forward, block, "ar", i, chunk, OpCode::AllReduce, Stream::Comm);
      in(op, whole(ps));
      out(op, whole(ps));
      if (bp.overlap == OverlapMode::None) blocking_.push_back(op.index);
    }
  }
}

// R_i: residual stream += the reduced partial sums (+ the row-parallel bias), one op per column chunk.
void Builder::fwd_residual(int l, Block block, int i) {
  const BlockPlan& bp = block_plan(l, block);
  const Box box = slice_box(bp, i);
  const LayerBuffers& b = lb_[size_t(l)];
  const bool attn = block == Block::Attn;
  const int32_t src = attn ? b.x_in : b.x_mid;
  const int32_t dst = attn ? b.x_mid : b.x_out;
  const int32_t bias = b.param[attn ? ProjB : Fc2B];
  const int64_t cw = h_ / bp.q;
  for (int c = 0; c < bp.q; ++c) {
    Op& op = emit(l, Phase::Forward, block, "add", i, bp.q > 1 ? c : -1, OpCode::ResidualAdd);
    in(op, rows(src, box, c * cw, (c + 1) * cw));
    in(op, whole(partial_buffer(false, block, l, bp, i, c)));
    if (bias >= 0) in(op, weight(bias, 0, 1, c * cw, (c + 1) * cw));
    out(op, rows(dst, box, c * cw, (c + 1) * cw));
  }
}

}  // namespace domino::detail
