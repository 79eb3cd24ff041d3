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
// slice. Parallel blocks (docs/plan-format.md, "Block structure"): with inter overlap the attention's adds
// all wait for the MLP's adds of the same rows. Post norms run right before their slice's add.
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
  if (sp_) {
    forward_block_sp(l, block);
    return;
  }
  if (bp.order == SliceOrder::DeepSpeed) {
    forward_block_deepspeed(l, block);
    return;
  }
  // Parallel layers with inter-layer overlap: nothing in the MLP's compute reads x_mid, so every attention
  // add waits (pending) until the MLP's add of the same rows needs it (fwd_residual).
  if (parallel_ && block == Block::Attn && bp.overlap == OverlapMode::Inter) {
    for (int i = 0; i < bp.p; ++i) {
      fwd_norm(l, block, i);
      fwd_front(l, block, i);
      fwd_back(l, block, i);
      if (i == 0) flush_deferred_forward();
      pending_attn_adds_.push_back(i);
    }
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

// Attention: QKV, QK-norm, rope (rotary models), the causal core. MLP: FC1, the activation.
void Builder::fwd_column_gemm(int l, Block block, int i, const Box& box, int chunk) {
  const NormColumnGemm a = norm_column_gemm(l, block);
  Op& op = emit(l, fwd_phase_, block, a.gemm, i, chunk, OpCode::MatMul);
  in(op, rows(sp_ ? gb_.sp_x : a.xn, box));  // sequence parallelism: the gathered rows
  in(op, whole(a.weight));
  if (a.bias >= 0) in(op, whole(a.bias));
  out(op, rows(a.y, box));
  op.m = box.rows(), op.k = h_, op.n = a.cols;
}

// pipeline: c runs the GEMM in c chunks of rows, each behind its own gather; the rest of the front is whole.
void Builder::fwd_front(int l, Block block, int i) {
  const BlockPlan& bp = block_plan(l, block);
  const Box box = slice_box(bp, i);
  const bool chunks = bp.pipeline > 1;
  for (int j = 0; j < bp.pipeline; ++j)
    fwd_column_gemm(l, block, i, chunks ? pipeline_chunk(box, j, bp.pipeline) : box, chunks ? j : -1);
  const LayerBuffers& b = lb_[size_t(l)];
  if (block == Block::Mlp) {
    Op& op = emit(l, fwd_phase_, block, "act", i, -1, activation_codes(m_.activation).fwd);
    in(op, rows(b.hpre, box));
    out(op, rows(b.act, box));
    return;
  }
  // QK-norm writes the normalised queries and keys to qk; rope then turns them there.
  const int32_t qk = qk_norm_ ? b.qk : b.qkv;
  if (qk_norm_) qk_norm_forward(l, i, box);
  if (rotary_) emit_rope(l, fwd_phase_, i, box, qk);
  emit_attn_core(l, i, box);
}

// Causal: the slice's queries see keys [0, its last position], from this and all earlier slices (with a
// sliding window only the last `window` positions). Selective recomputation emits it again in the backward.
void Builder::emit_attn_core(int l, int i, const Box& box) {
  const LayerBuffers& b = lb_[size_t(l)];
  const int32_t qk = qk_norm_ ? b.qk : b.qkv;
  const int64_t window = window_of(l);
  Op& op = emit(l, fwd_phase_, Block::Attn, "core", i, -1, OpCode::AttnFwd);
  qkv_operands(op, qk, b.qkv, box, key_box(l, box), false);
  out(op, rows(b.ctx, box));
  out(op, rows(b.probs, box));
  op.attrs.heads = int16_t(a_l_), op.attrs.kv_heads = int16_t(kv_l_), op.attrs.head_dim = int16_t(d_);
  op.attrs.window = int32_t(window);
  // QK^T and PV over the (query, key) pairs a causal kernel computes.
  op.flops = 4.0 * causal_pairs(box, window) * double(d_) * double(a_l_);
}

void Builder::fwd_back(int l, Block block, int i, const std::function<void()>& before_scatter) {
  const LayerBuffers& b = lb_[size_t(l)];
  if (block == Block::Attn) {
    fwd_row_parallel_gemm(l, block, i, "proj", b.ctx, b.param[ProjW], a_l_ * d_, before_scatter);
  } else {
    fwd_row_parallel_gemm(l, block, i, "fc2", b.act, b.param[Fc2W], f_l_, before_scatter);
  }
}

// Parallel blocks: the MLP reads the layer input x_in, through its own norm or (shared) through the
// attention's norm output xn1, so its front never waits for the attention's AllReduce. Post norms only:
// no norm before the block, the GEMM reads the residual stream itself.
Builder::NormColumnGemm Builder::norm_column_gemm(int l, Block block) const {
  const LayerBuffers& b = lb_[size_t(l)];
  if (!pre_norm_) {
    const bool attn = block == Block::Attn;
    const int32_t x = attn ? b.x_in : b.x_mid;
    if (attn) return {x, -1, -1, x, -1, "qkv", b.param[QkvW], b.param[QkvB], b.qkv, qkv_cols_, N1G};
    return {x, -1, -1, x, -1, "fc1", b.param[Fc1W], b.param[Fc1B], b.hpre, fc1_cols_, N2G};
  }
  if (block == Block::Attn) {
    return NormColumnGemm{b.x_in, b.param[N1G], b.param[N1B], b.xn1, b.st1, "qkv", b.param[QkvW],
                          b.param[QkvB], b.qkv, qkv_cols_, N1G};
  }
  if (shared_norm_) {
    return NormColumnGemm{b.x_in, b.param[N1G], b.param[N1B], b.xn1, b.st1, "fc1", b.param[Fc1W],
                          b.param[Fc1B], b.hpre, fc1_cols_, N1G};
  }
  return NormColumnGemm{parallel_ ? b.x_in : b.x_mid, b.param[N2G], b.param[N2B], b.xn2, b.st2, "fc1",
                        b.param[Fc1W], b.param[Fc1B], b.hpre, fc1_cols_, N2G};
}

void Builder::fwd_norm(int l, Block block, int i) {
  if (!pre_norm_ || (block == Block::Mlp && shared_norm_)) return;  // shared: the attention's norm wrote xn1
  const NormColumnGemm a = norm_column_gemm(l, block);
  const Box box = local(slice_box(block_plan(l, block), i));
  Op& op = emit(l, fwd_phase_, block, "norm", i, -1, rms_ ? OpCode::RmsNormFwd : OpCode::LayerNormFwd);
  in(op, rows(a.x, box));
  in(op, whole(a.gamma));
  if (layernorm_) in(op, whole(a.beta));
  out(op, rows(a.xn, box));
  out(op, rows(a.stats, box));
}

// The row-parallel GEMM of slice i into its partial sums, one per column chunk, each followed by its
// AllReduce on the communication stream (blocking when the block does not overlap). Sequence parallelism:
// a ReduceScatter instead, straight into the rank's rows of the residual stream's output (x_mid, x_out),
// which the residual add then completes in place.
void Builder::fwd_row_parallel_gemm(int l, Block block, int i, const char* name, int32_t x, int32_t w,
                                    int64_t k, const std::function<void()>& before_scatter) {
  const BlockPlan& bp = block_plan(l, block);
  if (bp.pipeline > 1) {
    fwd_row_parallel_pipelined(l, block, i, name, x, w, k);
    return;
  }
  const Box box = slice_box(bp, i);
  const int64_t cw = h_ / bp.q;
  for (int c = 0; c < bp.q; ++c) {
    const int chunk = bp.q > 1 ? c : -1;
    const int32_t ps = partial_buffer(false, block, l, bp, i, c);
    {
      Op& op = emit(l, fwd_phase_, block, name, i, chunk, OpCode::MatMul);
      in(op, rows(x, box));
      in(op, weight(w, 0, k, c * cw, (c + 1) * cw));
      out(op, whole(ps));
      op.m = box.rows(), op.k = k, op.n = cw;
    }
    if (sp_) {
      if (c == 0 && before_scatter) before_scatter();
      const LayerBuffers& b = lb_[size_t(l)];
      const int32_t rs = sp_collective(
          OpCode::ReduceScatter, l, fwd_phase_, block, "rs", i, chunk, whole(ps),
          rows(block == Block::Attn ? b.x_mid : b.x_out, local(box), c * cw, (c + 1) * cw), groups_in(box));
      if (rs >= 0 && bp.overlap == OverlapMode::None) blocking_.push_back(rs);
    } else if (plan_.comm_enabled) {
      Op& op = emit(l, fwd_phase_, block, "ar", i, chunk, OpCode::AllReduce, Stream::Comm);
      in(op, whole(ps));
      out(op, whole(ps));
      if (bp.overlap == OverlapMode::None) blocking_.push_back(op.index);
    }
  }
}

// Post norm of slice i: normalises the reduced sums (all h columns: q = 1) into post_y, which the residual
// add reads; the sums stay in their per-layer buffer for the backward.
Builder::PostNormOperands Builder::post_norm_operands(int l, Block block, int i) {
  const BlockPlan& bp = block_plan(l, block);
  const size_t k = block == Block::Attn ? 0 : 1;
  return {slice_box(bp, i), partial_buffer(false, block, l, bp, i, 0), lb_[size_t(l)].post_st[k],
          k == 0 ? P1G : P2G};
}

void Builder::fwd_post_norm(int l, Block block, int i) {
  const PostNormOperands p = post_norm_operands(l, block, i);
  const LayerBuffers& b = lb_[size_t(l)];
  Op& op =
      emit(l, fwd_phase_, block, "post.norm", i, -1, rms_ ? OpCode::RmsNormFwd : OpCode::LayerNormFwd);
  in(op, whole(p.sums));
  in(op, whole(b.param[size_t(p.gamma)]));
  if (layernorm_) in(op, whole(b.param[size_t(p.gamma + 1)]));
  out(op, rows(b.post_y[block == Block::Attn ? 0 : 1], p.box));
  out(op, rows(p.stats, p.box));
}

// R_i: residual stream += the reduced partial sums (+ the row-parallel bias), one op per column chunk;
// with a post norm, += their normalisation (q = 1, no bias). Sequence parallelism: on the rank's rows, the
// reduced sums already in the output (the ReduceScatter wrote them there).
void Builder::fwd_residual(int l, Block block, int i) {
  const BlockPlan& bp = block_plan(l, block);
  const Box box = local(slice_box(bp, i));
  const LayerBuffers& b = lb_[size_t(l)];
  const bool attn = block == Block::Attn;
  const int32_t src = attn ? b.x_in : b.x_mid;
  const int32_t dst = attn ? b.x_mid : b.x_out;
  const int32_t bias = b.param[attn ? ProjB : Fc2B];
  const int64_t cw = h_ / bp.q;
  if (!attn && !pending_attn_adds_.empty()) emit_pending_attn_adds(l, box);
  if (post_norm_) fwd_post_norm(l, block, i);
  for (int c = 0; c < bp.q; ++c) {
    Op& op = emit(l, fwd_phase_, block, "add", i, bp.q > 1 ? c : -1, OpCode::ResidualAdd);
    op.attrs.chunks = int16_t(bp.q);  // the cost model charges the first chunk the rows of all q (chunk_rows)
    in(op, rows(src, box, c * cw, (c + 1) * cw));
    if (post_norm_) {
      in(op, rows(b.post_y[attn ? 0 : 1], box));
    } else if (sp_) {
      in(op, rows(dst, box, c * cw, (c + 1) * cw));
    } else {
      in(op, whole(partial_buffer(false, block, l, bp, i, c)));
    }
    if (bias >= 0) in(op, weight(bias, 0, 1, c * cw, (c + 1) * cw));
    out(op, rows(dst, box, c * cw, (c + 1) * cw));
  }
}

// The pending attention adds (parallel layer l) of rows the MLP's add of `box` reads from x_mid.
void Builder::emit_pending_attn_adds(int l, const Box& box) {
  const BlockPlan& attn = block_plan(l, Block::Attn);
  std::vector<int> still;
  const std::vector<int> pending = std::move(pending_attn_adds_);
  pending_attn_adds_.clear();
  for (int j : pending) {
    if (slice_box(attn, j).intersects(box)) {
      fwd_residual(l, Block::Attn, j);
    } else {
      still.push_back(j);
    }
  }
  pending_attn_adds_ = std::move(still);
}

}  // namespace domino::detail
