// schedule_sp.cpp: Megatron's sequence parallelism in the builder (docs/plan-format.md, "Sequence
// parallelism"). Norms, residual adds, the embedding output and the final norm work on this rank's S/tp rows
// (SpLayout: g groups, one per sequence slice); each block's AllReduce becomes an AllGather of the norm
// output before the column-parallel GEMM and a ReduceScatter of the row-parallel GEMM's partial sums into the
// residual stream. Backward mirrors it: the residual gradient is gathered before the row-parallel backward,
// the norm output gathered again for the column-parallel weight gradient (Megatron keeps only the sharded
// copy), and the column-parallel input gradient reduce-scattered. The norm parameters' gradients, summed over
// the rank's rows only, are all-reduced before the optimizer.
//
// Slice order (deep; the deepspeed order is refused under SP): the communication stream runs its ops in
// program order, so a gather must be issued before the scatter it should not wait behind. Forward:
//   N0 AG0 F0 [held-back add] N1 AG1 B0(RS0) F1 R0 N2 AG2 B1(RS1) ... F(p-1) B(p-1) R(p-2) R(p-1)
// and with inter (the last add held back): ... F(p-1), B(p-1)'s GEMM, R(p-2) N'0 AG'0, RS(p-1), where N'0
// AG'0 are the next block's first norm and gather, issued ahead so that RS(p-1) runs behind that block's
// slice. Backward: B'(p-1) [held-back N'0 of the block before] F'(p-1), B'(p-2) N'(p-1) F'(p-2), ... with
// each F'_i gathering the residual gradient of slice i-1 (or, on slice 0 with inter, of the next processed
// block's last slice) before its own ReduceScatter.
#include "sim/ir/schedule_builder_internal.hpp"

namespace domino::detail {

Box Builder::local(const Box& full) const {
  if (!sp_) return full;
  return Box{full.b0, full.b1, full.s0 / m_.tp, full.s1 / m_.tp};
}

int16_t Builder::groups_in(const Box& full) const { return int16_t((full.s1 - full.s0) / (S_ / sp_groups_)); }

// AllGather: in = sharded rows, out = full rows; ReduceScatter: in = full rows (partial sums), out = sharded.
int32_t Builder::sp_collective(OpCode code, int layer, Phase phase, Block block, const char* name, int slice,
                               int chunk, const Region& from, const Region& to, int16_t groups) {
  if (!plan_.comm_enabled) return -1;
  Op& op = emit(layer, phase, block, name, slice, chunk, code, Stream::Comm);
  in(op, from);
  out(op, to);
  op.attrs.chunks = groups;
  op.attrs.reduce = ReduceOp::Sum;
  return op.index;
}

Box Builder::pipeline_chunk(const Box& box, int j, int chunks) const {
  const int64_t n = (box.s1 - box.s0) / chunks;
  return Box{box.b0, box.b1, box.s0 + j * n, box.s0 + (j + 1) * n};
}

void Builder::sp_gather_rows(int l, Phase phase, Block block, const char* name, int i, int32_t sharded,
                             int32_t full) {
  const BlockPlan& bp = block_plan(l, block);
  const Box box = slice_box(bp, i);
  for (int j = 0; j < bp.pipeline; ++j) {
    const Box part = bp.pipeline > 1 ? pipeline_chunk(box, j, bp.pipeline) : box;
    sp_collective(OpCode::AllGather, l, phase, block, name, i, bp.pipeline > 1 ? j : -1,
                  rows(sharded, local(part)), rows(full, part), groups_in(part));
  }
}

void Builder::fwd_norm_gather(int l, Block block, int i) {
  if (!sp_fwd_gathered_.insert({l, int(block), i}).second) return;
  fwd_norm(l, block, i);
  sp_gather_rows(l, Phase::Forward, block, "ag", i, norm_column_gemm(l, block).xn, gb_.sp_x);
}

// TransformerEngine's pipelined split for proj_fprop / fc2_fprop: the partial sums of chunk j are
// reduce-scattered while chunk j+1's GEMM runs; with overlap none only the last one blocks.
void Builder::fwd_row_parallel_pipelined(int l, Block block, int i, const char* name, int32_t x, int32_t w,
                                         int64_t k) {
  const BlockPlan& bp = block_plan(l, block);
  const Box box = slice_box(bp, i);
  const int32_t ps = partial_buffer(false, block, l, bp, i, 0);
  const LayerBuffers& b = lb_[size_t(l)];
  for (int j = 0; j < bp.pipeline; ++j) {
    const Box part = pipeline_chunk(box, j, bp.pipeline);
    Op& op = emit(l, Phase::Forward, block, name, i, j, OpCode::MatMul);
    in(op, rows(x, part));
    in(op, whole(w));
    out(op, rows(ps, part));
    op.m = part.rows(), op.k = k, op.n = h_;
    const int32_t rs =
        sp_collective(OpCode::ReduceScatter, l, Phase::Forward, block, "rs", i, j, rows(ps, part),
                      rows(block == Block::Attn ? b.x_mid : b.x_out, local(part)), groups_in(part));
    if (rs >= 0 && j + 1 == bp.pipeline && bp.overlap == OverlapMode::None) blocking_.push_back(rs);
  }
}

void Builder::forward_block_sp(int l, Block block) {
  const BlockPlan& bp = block_plan(l, block);
  int nl = 0;
  Block nb = Block::None;
  const bool ahead = defers_residual(l, block) && next_block(l, block, &nl, &nb);
  for (int i = 0; i < bp.p; ++i) {
    fwd_norm_gather(l, block, i);
    fwd_front(l, block, i);
    if (i == 0) flush_deferred_forward();
    if (i + 1 < bp.p) {
      fwd_norm_gather(l, block, i + 1);
      fwd_back(l, block, i);
      if (i > 0) fwd_residual(l, block, i - 1);
    } else if (ahead) {
      // The next block's first slice reads rows R(p-2) writes (never those of the held-back R(p-1)); its
      // gather goes ahead of the last ReduceScatter, which then runs behind that slice.
      fwd_back(l, block, i, [&] {
        fwd_residual(l, block, i - 1);
        fwd_norm_gather(nl, nb, 0);
      });
    } else {
      fwd_back(l, block, i);
      if (i > 0) fwd_residual(l, block, i - 1);
    }
  }
  if (ahead) {
    deferred_ = Deferred{true, l, block, bp.p - 1};
  } else {
    fwd_residual(l, block, bp.p - 1);
  }
}

void Builder::bwd_gather_dy(int l, Block block, int i) {
  if (!sp_dy_gathered_.insert({l, int(block), i}).second) return;
  sp_gather_rows(l, Phase::Backward, block, "dy.ag", i, gb_.dresid, gb_.sp_dy);
}

// TransformerEngine's ring exchange for proj_dgrad / fc2_dgrad: the GEMM of chunk j runs while chunk j+1's
// rows of the gradient arrive.
void Builder::bwd_row_dgrad_pipelined(int l, Block block, int i, const LinearBwd& lin) {
  const BlockPlan& bp = block_plan(l, block);
  const Box box = slice_box(bp, i);
  for (int j = 0; j < bp.pipeline; ++j) {
    const Box part = pipeline_chunk(box, j, bp.pipeline);
    Op& op = emit(l, Phase::Backward, block, lin.dgrad, i, j, OpCode::MatMulDgrad);
    in(op, rows(lin.dy, part));
    in(op, whole(lb_[size_t(l)].param[lin.param]));
    out(op, rows(lin.dx, part));
    op.m = part.rows(), op.n = lin.in_cols, op.k = h_;
  }
}

int32_t Builder::bwd_column_input(int l, Block block, int i) {
  const int32_t xn = norm_column_gemm(l, block).xn;
  if (!sp_) return xn;
  int pl = 0;
  Block pb = Block::None;
  if (i > 0) {
    bwd_gather_dy(l, block, i - 1);
  } else if (defers_norm_backward(l, block) && prev_block(l, block, &pl, &pb)) {
    bwd_gather_dy(pl, pb, block_plan(pl, pb).p - 1);  // its rows are final: only N'0, held back, is left
  }
  // Megatron's order: launched before the dgrad GEMM, which it overlaps (TransformerEngine: "bulk").
  const Box box = slice_box(block_plan(l, block), i);
  sp_collective(OpCode::AllGather, l, Phase::Backward, block, "x.ag", i, -1, rows(xn, local(box)),
                rows(gb_.sp_x, box), groups_in(box));
  return gb_.sp_x;
}

void Builder::backward_block_sp(int l, Block block) {
  const BlockPlan& bp = block_plan(l, block);
  for (int j = 0; j < bp.p; ++j) {
    const int i = bp.p - 1 - j;
    bwd_back(l, block, i);
    // Right after the first B': the held-back norm backward's ReduceScatter runs behind it, and the gather
    // F' issues next reads rows that norm backward may write.
    if (j == 0) flush_deferred_backward();
    if (j > 0) bwd_norm(l, block, i + 1);
    bwd_front(l, block, i);
  }
  if (defers_norm_backward(l, block)) {
    deferred_ = Deferred{true, l, block, 0};
  } else {
    bwd_norm(l, block, 0);
  }
}

void Builder::sp_norm_grad_allreduces(int layer, Block block, const std::array<int32_t, 2>& grads) {
  static const char* const kNames[2] = {"norm.g.ar", "norm.b.ar"};
  for (size_t k = 0; k < grads.size(); ++k) {
    if (grads[k] < 0 || !plan_.comm_enabled) continue;
    Op& op = emit(layer, Phase::Backward, block, kNames[k], -1, -1, OpCode::AllReduce, Stream::Comm);
    in(op, whole(grads[k]));
    out(op, whole(grads[k]));
  }
}

}  // namespace domino::detail
