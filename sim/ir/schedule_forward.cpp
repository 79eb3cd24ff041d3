// schedule_forward.cpp: forward ops in program order. A block's slice i has three parts: its norm N_i, its
// front F_i (column-parallel GEMM, then attention or the activation) and its back B_i (row-parallel GEMM
// and its AllReduce launches); R_i is its residual add, which waits for the AllReduce. Two orders
// (BlockPlan::order, docs/plan-format.md):
// - deep: N0 F0 B0, N1 F1 B1, R0, N2 F2 B2, R1, ..., R(p-1): slice i's AllReduce runs behind slice i+1's
//   whole compute. With inter-layer overlap R(p-1) comes after the next block's N0 F0 B0.
// - deepspeed (DeepSpeed's released Domino): F0, B0, F1, R0, B1, F2, R1, B2, ..., R(p-1): slice i's
//   AllReduce runs behind slice i+1's front only. With inter-layer overlap R(p-1) comes after the next
//   block's F0 and before its B0. The norm of slice i follows the previous block's R_i when both blocks
//   are in this order and the slices cover the same rows (DeepSpeed's fused add + LayerNorm); otherwise
//   N0 comes before F0 and N(i+1) right before B_i (for p = 2 on layer 0: N0 F0 N1 B0, as DeepSpeed).
// The inter-layer hold-back happens only when the next block's first slice shares no rows with the last
// slice.
#include "sim/ir/schedule_builder_internal.hpp"

namespace domino::detail {

void Builder::forward() {
  embedding_forward();
  const int L = m_.layers;
  for (int l = 0; l < L; ++l) {
    forward_block(l, Block::Attn);
    forward_block(l, Block::Mlp);
  }
  flush_deferred_forward();
  // Head: needs every row, so nothing crosses into it.
  head_forward(L > 0 ? lb_[size_t(L - 1)].x_out : gb_.x0);
}

void Builder::forward_block(int l, Block block) {
  const BlockPlan& bp = block_plan(l, block);
  if (bp.order == SliceOrder::DeepSpeed) {
    forward_block_deepspeed(l, block);
    return;
  }
  for (int i = 0; i < bp.p; ++i) {
    fwd_norm(l, block, i);
    fwd_front(l, block, i);
    fwd_back(l, block, i);
    if (i == 0) flush_deferred_forward();
    if (i > 0) fwd_residual(l, block, i - 1);
  }
  if (defers_residual(l, block)) {
    deferred_ = Deferred{true, l, block, bp.p - 1};
  } else {
    fwd_residual(l, block, bp.p - 1);
  }
}

void Builder::forward_block_deepspeed(int l, Block block) {
  const BlockPlan& bp = block_plan(l, block);
  const auto own_norm = [&](int i) {
    if (i < bp.p && !early_norm(l, block, i)) fwd_norm(l, block, i);
  };
  own_norm(0);
  fwd_front(l, block, 0);
  flush_deferred_forward();
  own_norm(1);
  fwd_back(l, block, 0);
  for (int i = 1; i < bp.p; ++i) {
    fwd_front(l, block, i);
    residual_then_next_norm(l, block, i - 1);
    own_norm(i + 1);
    fwd_back(l, block, i);
  }
  if (defers_residual(l, block)) {
    deferred_ = Deferred{true, l, block, bp.p - 1};
  } else {
    residual_then_next_norm(l, block, bp.p - 1);
  }
}

void Builder::residual_then_next_norm(int l, Block block, int i) {
  fwd_residual(l, block, i);
  int nl = 0;
  Block nb = Block::None;
  if (next_block(l, block, &nl, &nb) && early_norm(nl, nb, i)) fwd_norm(nl, nb, i);
}

// Attention: QKV, rope (Llama), the causal core. MLP: FC1, the activation.
void Builder::fwd_front(int l, Block block, int i) {
  const NormColumnGemm a = norm_column_gemm(l, block);
  const Box box = slice_box(block_plan(l, block), i);
  {
    Op& op = emit(l, Phase::Forward, block, a.gemm, i, -1, OpCode::MatMul);
    in(op, rows(a.xn, box));
    in(op, whole(a.weight));
    if (a.bias >= 0) in(op, whole(a.bias));
    out(op, rows(a.y, box));
    op.m = box.rows(), op.k = h_, op.n = a.cols;
  }
  const LayerBuffers& b = lb_[size_t(l)];
  if (block == Block::Mlp) {
    Op& op = emit(l, Phase::Forward, block, "act", i, -1, activation_codes(m_.activation).fwd);
    in(op, rows(b.hpre, box));
    out(op, rows(b.act, box));
    return;
  }
  const int64_t k_end = (a_l_ + kv_l_) * d_;  // end of the key columns: rope turns queries and keys
  if (rotary_) {
    Op& op = emit(l, Phase::Forward, block, "rope", i, -1, OpCode::RopeFwd);
    in(op, rows(b.qkv, box, 0, k_end));
    out(op, rows(b.qkv, box, 0, k_end));
    op.attrs.heads = int16_t(a_l_ + kv_l_), op.attrs.head_dim = int16_t(d_);
  }
  // Causal: the slice's queries see keys [0, its last position], from this and all earlier slices.
  const Box keys{box.b0, box.b1, 0, box.s1};
  Op& op = emit(l, Phase::Forward, block, "core", i, -1, OpCode::AttnFwd);
  qkv_operands(op, b.qkv, box, keys, false);
  out(op, rows(b.ctx, box));
  out(op, rows(b.probs, box));
  op.attrs.heads = int16_t(a_l_), op.attrs.kv_heads = int16_t(kv_l_), op.attrs.head_dim = int16_t(d_);
  // QK^T and PV over the (query, key) pairs a causal kernel computes.
  op.flops = 4.0 * causal_pairs(box) * double(d_) * double(a_l_);
}

void Builder::fwd_back(int l, Block block, int i) {
  const LayerBuffers& b = lb_[size_t(l)];
  if (block == Block::Attn) {
    fwd_row_parallel_gemm(l, block, i, "proj", b.ctx, b.param[ProjW], a_l_ * d_);
  } else {
    fwd_row_parallel_gemm(l, block, i, "fc2", b.act, b.param[Fc2W], f_l_);
  }
}

Builder::NormColumnGemm Builder::norm_column_gemm(int l, Block block) const {
  const LayerBuffers& b = lb_[size_t(l)];
  return block == Block::Attn
             ? NormColumnGemm{b.x_in, b.param[N1G], b.param[N1B], b.xn1, b.st1, "qkv", b.param[QkvW],
                              b.param[QkvB], b.qkv, qkv_cols_}
             : NormColumnGemm{b.x_mid, b.param[N2G], b.param[N2B], b.xn2, b.st2, "fc1", b.param[Fc1W],
                              b.param[Fc1B], b.hpre, fc1_cols_};
}

void Builder::fwd_norm(int l, Block block, int i) {
  const NormColumnGemm a = norm_column_gemm(l, block);
  const Box box = slice_box(block_plan(l, block), i);
  Op& op = emit(l, Phase::Forward, block, "norm", i, -1, rms_ ? OpCode::RmsNormFwd : OpCode::LayerNormFwd);
  in(op, rows(a.x, box));
  in(op, whole(a.gamma));
  if (layernorm_) in(op, whole(a.beta));
  out(op, rows(a.xn, box));
  out(op, rows(a.stats, box));
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
