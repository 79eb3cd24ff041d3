// schedule_recompute.cpp: activation recomputation (Plan::recompute, docs/plan-format.md "Activation
// recomputation"). The recomputed ops are ordinary forward ops in phase Recompute (ids "L3.rc.attn.qkv.s0"),
// so the simulator times them and the executors run them like any other; they write the buffers shared by
// layer parity that activation_buffer hands out instead of per-layer ones.
#include "sim/ir/schedule_builder_internal.hpp"

namespace domino::detail {

// Full: at the start of layer l's backward, its forward again as far as its backward reads: the attention
// block whole (norm, QKV, core, projection with its AllReduces, residual add into x_mid, which the MLP reads),
// then the MLP's norm, FC1 and activation. The MLP's FC2, AllReduce and residual add are left out: their
// result x_out is kept (the next layer's input), and nothing in the backward reads FC2's output. Parallel
// blocks: the attention's projection and add are left out too (the MLP reads the layer input, not x_mid).
// The plan's slicing holds, each slice's AllReduce overlapping the next slice as in the forward; nothing is
// held back into the next block (inter-layer deferral has no next block here).
void Builder::recompute_layer(int l) {
  fwd_phase_ = Phase::Recompute;
  for (const Block block : {Block::Attn, Block::Mlp}) {
    const BlockPlan& bp = block_plan(l, block);
    const bool to_output = block == Block::Attn && !parallel_;
    for (int i = 0; i < bp.p; ++i) {
      fwd_norm(l, block, i);
      fwd_front(l, block, i);
      if (!to_output) continue;
      fwd_back(l, block, i);
      if (i > 0) fwd_residual(l, block, i - 1);
    }
    if (to_output) fwd_residual(l, block, bp.p - 1);
  }
  fwd_phase_ = Phase::Forward;
}

// Selective: the core's probabilities were not kept (a buffer shared by layer parity holds the last ones
// written), so the core runs again right before its backward. It writes the context into the layer's saved
// ctx rows of the slice, the same values, which the projection's weight gradient has already read.
void Builder::recompute_attn_core(int l, int i, const Box& box) {
  fwd_phase_ = Phase::Recompute;
  emit_attn_core(l, i, box);
  fwd_phase_ = Phase::Forward;
}

}  // namespace domino::detail
