// schedule_backward.cpp: backward and optimizer ops in program order. Blocks run in reverse (head, layer
// L-1 MLP, L-1 attention, ..., embedding), and each block's slices in reverse (p-1 .. 0). For slice i,
// B'_i is the backward of its back (row-parallel dgrad, then wgrad, per chunk), F'_i the backward of its
// front (attention or activation backward, then per chunk the column-parallel dgrad into a partial buffer
// and its AllReduce launch, then the column-parallel wgrad, which runs behind those AllReduces with
// bwd_overlap), and N'_i the norm backward that waits for them and adds the reduced gradient into the
// residual gradient. Two orders (BlockPlan::order):
// - deep: B'(p-1) F'(p-1), B'(p-2) F'(p-2), N'(p-1), ..., N'0: slice i's AllReduces run behind its wgrad and
//   slice i-1's whole backward. With inter-layer overlap N'0 comes after the next-processed block's first
//   B' F' pair.
// - deepspeed: the reverse of the forward's program order (what PyTorch's autograd runs for DeepSpeed's two
//   slice branches), with residual adds contributing nothing:
//     [N''(p-1)]  B'(p-1) [N''(p-2)] F'(p-1)  B'(p-2) [N'(p-1)] [N''(p-3)] F'(p-2)  ...
//     B'1 [N'2] [N''0] F'1  B'0 [N'1] [N'(p-1)*] F'0 [N'0]
//   where N''j is the next block's (processed just before) norm backward of slice j, present when that
//   norm ran early in the forward (after this block's R_j); N''(p-1) stands first only when this block's
//   R(p-1) was not held back (with the hold-back it sits in the next block's own order, as N'(p-1)*);
//   N'j in brackets is this block's own norm backward where its forward norm was not early, and
//   N'(p-1)* is present when the norm ran early right after the previous block's held-back R. Early
//   norms' backwards run in the previous block's order (its N''). So slice i's column AllReduces run
//   behind its own wgrad and the other slice's B' (for p = 2: F'1's behind B'0, F'0's behind the
//   previous block's B'1), and N' waits for them just before it runs: DeepSpeed's rule.
//   A deep next-processed block's held-back N'0 comes after this block's first B'.
// Parallel blocks (deep order only): the MLP's N' wait until the attention's B' have read d(x_out) of their
// rows. Post norms: B'_i starts with the post norm's backward.
#include "sim/ir/schedule_builder_internal.hpp"

namespace domino::detail {

void Builder::backward() {
  const int L = m_.layers;
  head_backward(L > 0 ? lb_[size_t(L - 1)].x_out : gb_.x0);
  for (int l = L - 1; l >= 0; --l) {
    if (plan_.recompute == Recompute::Full) recompute_layer(l);
    backward_block(l, Block::Mlp);
    backward_block(l, Block::Attn);
  }
  flush_deferred_backward();
  embedding_backward();
}

void Builder::backward_block(int l, Block block) {
  const BlockPlan& bp = block_plan(l, block);
  if (sp_) {
    backward_block_sp(l, block);
    return;
  }
  if (bp.order == SliceOrder::DeepSpeed) {
    backward_block_deepspeed(l, block);
    return;
  }
  // Parallel layers: the MLP's norm backwards wait (pending) for the attention's row-parallel backward,
  // which must read d(x_out) before they add into it; each goes right before the attention's next norm
  // backward once the attention has read all its rows (latest: the end of the attention's block).
  const bool mlp_pending = parallel_ && block == Block::Mlp;
  const bool attn_flushes = parallel_ && block == Block::Attn;
  for (int j = 0; j < bp.p; ++j) {
    const int i = bp.p - 1 - j;
    bwd_back(l, block, i);
    bwd_front(l, block, i);
    if (j == 0) flush_deferred_backward();
    if (j > 0 && attn_flushes) emit_pending_mlp_norms(l, i);
    if (j > 0 && mlp_pending) pending_mlp_norms_.push_back(i + 1);
    if (j > 0 && !mlp_pending) bwd_norm(l, block, i + 1);
  }
  if (mlp_pending) {
    pending_mlp_norms_.push_back(0);
    pending_layer_ = l;
    return;
  }
  if (attn_flushes) emit_pending_mlp_norms(l, 0);
  if (defers_norm_backward(l, block)) {
    deferred_ = Deferred{true, l, block, 0};
  } else {
    bwd_norm(l, block, 0);
  }
}

// Emits the pending MLP norm backwards of layer l whose rows no attention slice below
// `lowest_attn_slice_done` covers: every attention slice that reads their d(x_out) rows has run its B'.
void Builder::emit_pending_mlp_norms(int l, int lowest_attn_slice_done) {
  if (pending_layer_ != l) return;
  const BlockPlan& attn = block_plan(l, Block::Attn);
  const BlockPlan& mlp = block_plan(l, Block::Mlp);
  std::vector<int> still;
  for (int k : pending_mlp_norms_) {
    bool read = true;
    for (int a = 0; a < lowest_attn_slice_done; ++a)
      read = read && !slice_box(attn, a).intersects(slice_box(mlp, k));
    if (read) {
      bwd_norm(l, Block::Mlp, k);
    } else {
      still.push_back(k);
    }
  }
  pending_mlp_norms_ = std::move(still);
}

// Mirrors forward_block_deepspeed op for op (see the header).
void Builder::backward_block_deepspeed(int l, Block block) {
  const BlockPlan& bp = block_plan(l, block);
  int nl = 0, pl = 0;
  Block nb = Block::None, pb = Block::None;
  const bool has_next = next_block(l, block, &nl, &nb);
  const auto next_norm = [&](int i) {
    if (i >= 0 && has_next && early_norm(nl, nb, i)) bwd_norm(nl, nb, i);
  };
  const auto own_norm = [&](int i) {
    if (i < bp.p && !early_norm(l, block, i)) bwd_norm(l, block, i);
  };
  if (!defers_residual(l, block)) next_norm(bp.p - 1);
  for (int i = bp.p - 1; i >= 0; --i) {
    bwd_back(l, block, i);
    if (i == bp.p - 1) flush_deferred_backward();
    own_norm(i + 1);
    if (i > 0) {
      next_norm(i - 1);
      bwd_front(l, block, i);
    }
  }
  if (prev_block(l, block, &pl, &pb) && defers_residual(pl, pb) && early_norm(l, block, bp.p - 1))
    bwd_norm(l, block, bp.p - 1);
  bwd_front(l, block, 0);
  own_norm(0);
}

// The waits of a column-parallel layer's AllReduces follow bwd_overlap (its wgrad waits or not) and the
// overlap mode (none: the compute op after the wgrad waits).
void Builder::after_input_grad_allreduces(Op& wgrad, const std::vector<int32_t>& ars, const BlockPlan& bp) {
  if (!bp.bwd_overlap) wgrad.deps.insert(wgrad.deps.end(), ars.begin(), ars.end());
  if (bp.overlap == OverlapMode::None) blocking_.insert(blocking_.end(), ars.begin(), ars.end());
}

// Row-parallel layer: q input-gradient chunks (each reads its column chunk of dy) accumulate into dx, then
// q weight-gradient chunks.
void Builder::bwd_row_parallel(int l, Block block, int i, const LinearBwd& lin) {
  const BlockPlan& bp = block_plan(l, block);
  const Box box = slice_box(bp, i);
  const LayerBuffers& b = lb_[size_t(l)];
  const int64_t cw = h_ / bp.q;
  const bool first_slice = i == bp.p - 1;  // first in backward order: weight gradients start with "="
  if (bp.pipeline > 1) bwd_row_dgrad_pipelined(l, block, i, lin);
  for (int c = 0; c < bp.q && bp.pipeline == 1; ++c) {
    Op& op = emit(l, Phase::Backward, block, lin.dgrad, i, bp.q > 1 ? c : -1, OpCode::MatMulDgrad);
    in(op, rows(lin.dy, box, c * cw, (c + 1) * cw));
    in(op, weight(b.param[lin.param], 0, lin.in_cols, c * cw, (c + 1) * cw));
    out(op, rows(lin.dx, box));
    op.attrs.accumulate = c > 0;
    op.m = box.rows(), op.n = lin.in_cols, op.k = cw;
  }
  for (int c = 0; c < bp.q; ++c) {
    Op& op = emit(l, Phase::Backward, block, lin.wgrad, i, bp.q > 1 ? c : -1, OpCode::MatMulWgrad);
    in(op, rows(lin.saved_input, box));
    in(op, rows(lin.dy, box, c * cw, (c + 1) * cw));
    out(op, weight(b.grad[lin.param], 0, lin.in_cols, c * cw, (c + 1) * cw));
    if (b.grad[lin.param + 1] >= 0) out(op, weight(b.grad[lin.param + 1], 0, 1, c * cw, (c + 1) * cw));
    op.attrs.accumulate = !first_slice;
    op.m = lin.in_cols, op.n = cw, op.k = box.rows();
  }
}

// Column-parallel layer: q input-gradient chunks into partial-sum buffers, each all-reduced on the
// communication stream, then the weight gradient.
void Builder::bwd_column_parallel(int l, Block block, int i, const LinearBwd& lin) {
  const BlockPlan& bp = block_plan(l, block);
  const Box box = slice_box(bp, i);
  const LayerBuffers& b = lb_[size_t(l)];
  const int64_t cw = h_ / bp.q;
  std::vector<int32_t> ars;
  for (int c = 0; c < bp.q; ++c) {
    const int chunk = bp.q > 1 ? c : -1;
    const int32_t ps = partial_buffer(true, block, l, bp, i, c);
    {
      Op& op = emit(l, Phase::Backward, block, lin.dgrad, i, chunk, OpCode::MatMulDgrad);
      in(op, rows(lin.dy, box));
      in(op, weight(b.param[lin.param], c * cw, (c + 1) * cw, 0, lin.out_cols));
      out(op, whole(ps));
      op.m = box.rows(), op.n = cw, op.k = lin.out_cols;
    }
    if (sp_) {
      // Sequence parallelism: the rank's rows of the reduced gradient, which the norm backward reads.
      const int32_t rs =
          sp_collective(OpCode::ReduceScatter, l, Phase::Backward, block, "rs", i, chunk, whole(ps),
                        whole(partial_buffer(true, block, l, bp, i, c, true)), groups_in(box));
      if (rs >= 0) ars.push_back(rs);
    } else if (plan_.comm_enabled) {
      Op& op = emit(l, Phase::Backward, block, "ar", i, chunk, OpCode::AllReduce, Stream::Comm);
      in(op, whole(ps));
      out(op, whole(ps));
      ars.push_back(op.index);
    }
  }
  Op& op = emit(l, Phase::Backward, block, lin.wgrad, i, -1, OpCode::MatMulWgrad);
  in(op, rows(lin.saved_input, box));
  in(op, rows(lin.dy, box));
  out(op, whole(b.grad[lin.param]));
  if (b.grad[lin.param + 1] >= 0) out(op, whole(b.grad[lin.param + 1]));
  op.attrs.accumulate = i != bp.p - 1;
  op.m = h_, op.n = lin.out_cols, op.k = box.rows();
  after_input_grad_allreduces(op, ars, bp);
}

// With a post norm, the row-parallel layer's output gradient is the post norm's backward of d(x_out) rows.
void Builder::bwd_back(int l, Block block, int i) {
  const LayerBuffers& b = lb_[size_t(l)];
  if (post_norm_) bwd_post_norm(l, block, i);
  if (sp_) bwd_gather_dy(l, block, i);
  const int32_t dy = post_norm_ ? gb_.dpost : sp_ ? gb_.sp_dy : gb_.dresid;
  if (block == Block::Mlp) {
    bwd_row_parallel(l, block, i, {"fc2.dgrad", "fc2.wgrad", Fc2W, b.act, dy, gb_.dact, f_l_, h_});
  } else {
    bwd_row_parallel(l, block, i, {"proj.dgrad", "proj.wgrad", ProjW, b.ctx, dy, gb_.dctx, a_l_ * d_, h_});
  }
}

// Post norm backward of slice i: its input is the saved reduced sums, its output gradient the residual
// gradient's rows (one chunk: q = 1); writes the gradient of the reduced sums into dpost.
void Builder::bwd_post_norm(int l, Block block, int i) {
  const PostNormOperands p = post_norm_operands(l, block, i);
  const LayerBuffers& b = lb_[size_t(l)];
  Op& op = emit(l, Phase::Backward, block, "post.norm.bwd", i, -1,
                rms_ ? OpCode::RmsNormBwd : OpCode::LayerNormBwd);
  in(op, whole(p.sums));
  in(op, rows(p.stats, p.box));
  in(op, whole(b.param[size_t(p.gamma)]));
  in(op, rows(gb_.dresid, p.box));
  out(op, rows(gb_.dpost, p.box));
  const int32_t dgamma = b.grad[size_t(p.gamma)];
  out(op, whole(dgamma));
  if (layernorm_) out(op, whole(b.grad[size_t(p.gamma + 1)]));
  op.attrs.chunks = 1;
  op.attrs.accumulate_params = !norm_grads_started_.insert(dgamma).second;
}

void Builder::bwd_front(int l, Block block, int i) {
  const BlockPlan& bp = block_plan(l, block);
  const Box box = slice_box(bp, i);
  const LayerBuffers& b = lb_[size_t(l)];
  const Phase BW = Phase::Backward;
  if (block == Block::Mlp) {
    {
      Op& op = emit(l, BW, block, "act.bwd", i, -1, activation_codes(m_.activation).bwd);
      in(op, rows(b.hpre, box));
      in(op, rows(gb_.dact, box));
      out(op, rows(gb_.dhpre, box));
    }
    const int32_t x = bwd_column_input(l, block, i);
    bwd_column_parallel(l, block, i, {"fc1.dgrad", "fc1.wgrad", Fc1W, x, gb_.dhpre, -1, h_, fc1_cols_});
    return;
  }
  // With QK-norm dQ and dK go to the gradient of the normalised [q | k], whose norms' backward writes
  // qkv's gradient columns.
  const int32_t qk = qk_norm_ ? b.qk : b.qkv, dqk = qk_norm_ ? gb_.dqk : gb_.dqkv;
  const int64_t window = window_of(l);
  if (plan_.recompute == Recompute::Selective) recompute_attn_core(l, i, box);
  {
    Op& op = emit(l, BW, block, "core.bwd", i, -1, OpCode::AttnBwd);
    qkv_operands(op, qk, b.qkv, box, key_box(l, box), false);
    in(op, rows(b.probs, box));
    in(op, rows(gb_.dctx, box));
    qkv_operands(op, dqk, gb_.dqkv, box, key_box(l, box), true);
    // Sequence slices share keys: the last slice (processed first) covers them all and writes "=",
    // earlier slices add their share. With a window a slice writes the keys below the next slice's first
    // key, which no slice touched before it.
    op.attrs.accumulate = bp.dim == SplitDim::Sequence && i != bp.p - 1;
    if (op.attrs.accumulate) op.attrs.overwrite_end = int32_t(first_key(slice_box(bp, i + 1), window));
    op.attrs.heads = int16_t(a_l_), op.attrs.kv_heads = int16_t(kv_l_), op.attrs.head_dim = int16_t(d_);
    op.attrs.window = int32_t(window);
    // dV, dP, dQ and dK: four products over the causal (query, key) pairs.
    op.flops = 8.0 * causal_pairs(box, window) * double(d_) * double(a_l_);
  }
  if (rotary_) emit_rope(l, BW, i, box, dqk);
  if (qk_norm_) qk_norm_backward(l, i, box);
  const int32_t x = bwd_column_input(l, block, i);
  bwd_column_parallel(l, block, i, {"qkv.dgrad", "qkv.wgrad", QkvW, x, gb_.dqkv, -1, h_, qkv_cols_});
}

// N'_i: the norm backward adds the reduced input gradient (q chunks) into the residual gradient, which
// already holds the pass-through part.
// A shared norm (parallel blocks) is linear in its output gradient: the MLP runs its own norm backward with
// the attention norm's input, stats and gamma, adding into the same gamma / beta gradients and d(x_in).
// Exact, at the price of one more small op per slice.
// Without a norm before the block (post only) N'_i is a plain add of the reduced sums (q = 1).
void Builder::bwd_norm(int l, Block block, int i) {
  const BlockPlan& bp = block_plan(l, block);
  const Box box = slice_box(bp, i);
  const LayerBuffers& b = lb_[size_t(l)];
  if (!pre_norm_) {
    Op& op = emit(l, Phase::Backward, block, "add.bwd", i, -1, OpCode::ResidualAdd);
    in(op, rows(gb_.dresid, box));
    in(op, whole(partial_buffer(true, block, l, bp, i, 0)));
    out(op, rows(gb_.dresid, box));
    return;
  }
  const NormColumnGemm a = norm_column_gemm(l, block);
  const Box rows_here = local(box);  // sequence parallelism: the rank's rows, the reduce-scattered gradient
  Op& op =
      emit(l, Phase::Backward, block, "norm.bwd", i, -1, rms_ ? OpCode::RmsNormBwd : OpCode::LayerNormBwd);
  in(op, rows(a.x, rows_here));
  in(op, rows(a.stats, rows_here));
  in(op, whole(a.gamma));
  for (int c = 0; c < bp.q; ++c) in(op, whole(partial_buffer(true, block, l, bp, i, c, sp_)));
  out(op, rows(gb_.dresid, rows_here));
  const int32_t dgamma = b.grad[size_t(a.norm_param)];
  out(op, whole(dgamma));
  if (layernorm_) out(op, whole(b.grad[size_t(a.norm_param + 1)]));
  op.attrs.chunks = int16_t(bp.q);
  op.attrs.accumulate = true;
  // The first writer of the gradients (slice p-1 of an unshared norm) writes "=".
  op.attrs.accumulate_params = !norm_grads_started_.insert(dgamma).second;
  // The last norm backward of the block completes its (per-rank partial) parameter gradients.
  if (sp_ && ++sp_norm_bwds_[{l, int(block)}] == bp.p)
    sp_norm_grad_allreduces(l, block, {dgamma, layernorm_ ? b.grad[size_t(a.norm_param + 1)] : -1});
}

// Megatron-LM's parameter groups: weight matrices and embeddings decay; biases and norm parameters do not.
static bool decays(ParamKind k) {
  switch (k) {
    case ParamKind::QkvWeight:
    case ParamKind::ProjWeight:
    case ParamKind::Fc1Weight:
    case ParamKind::Fc2Weight:
    case ParamKind::TokenEmbedding:
    case ParamKind::PositionEmbedding:
    case ParamKind::HeadWeight:
      return true;
    default:
      return false;
  }
}

void Builder::optimizer_step(int layer, Block block, const char* name, int32_t param, int32_t grad,
                             int32_t s1, int32_t s2) {
  if (param < 0) return;
  const bool adam = options_.optimizer == OptimizerKind::Adam;
  Op& op = emit(layer, Phase::Optimizer, block, name, -1, -1, adam ? OpCode::AdamStep : OpCode::SgdStep);
  in(op, whole(grad));
  out(op, whole(param));
  out(op, whole(s1));
  if (adam) out(op, whole(s2));
  op.attrs.weight_decay = decays(s_.buffers[size_t(param)].param);
}

void Builder::optimizer() {
  static const char* const kLayerNames[kLayerParams] = {
      "qkv.w", "qkv.b", "proj.w",      "proj.b",      "fc1.w",      "fc1.b",
      "fc2.w", "fc2.b", "attn.norm.g", "attn.norm.b", "mlp.norm.g", "mlp.norm.b",
      "attn.qnorm.g", "attn.knorm.g", "attn.post.norm.g", "attn.post.norm.b", "mlp.post.norm.g",
      "mlp.post.norm.b"};
  const auto attn_param = [](int p) {
    return p <= ProjB || p == N1G || p == N1B || p == QnG || p == KnG || p == P1G || p == P1B;
  };
  static const char* const kGlobalNames[kGlobalParams] = {"tok", "pos", "w", "norm.g", "norm.b"};
  static const Block kGlobalBlocks[kGlobalParams] = {Block::Embedding, Block::Embedding, Block::Head,
                                                     Block::Head, Block::Head};
  for (int g = 0; g < kGlobalParams; ++g) {
    optimizer_step(-1, kGlobalBlocks[g], kGlobalNames[g], gb_.param[g], gb_.grad[g], gb_.state1[g],
                   gb_.state2[g]);
  }
  for (int l = 0; l < m_.layers; ++l) {
    const LayerBuffers& b = lb_[size_t(l)];
    for (int p = 0; p < kLayerParams; ++p) {
      const Block block = attn_param(p) ? Block::Attn : Block::Mlp;
      optimizer_step(l, block, kLayerNames[p], b.param[p], b.grad[p], b.state1[p], b.state2[p]);
    }
  }
}

}  // namespace domino::detail
