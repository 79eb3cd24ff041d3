// schedule_head.cpp: the two ends of the model, vocabulary-parallel as in Megatron-LM. Each rank holds
// V/tp rows of the token embedding and V/tp columns of the output head (ModelSpec::vocab_per_rank):
// - embedding: each rank looks up the tokens of its shard (zeros for the others), an AllReduce sums the
//   shards, then the replicated positional embedding (GPT) is added; backward scatters the replicated
//   input gradient into the shard's rows, without a collective;
// - head: a column-parallel GEMM leaves the logits sharded [B, S, V/tp]; the cross-entropy combines the
//   shards with an AllReduce(max) of the per-token max and an AllReduce(sum) of (sum of exp, target logit);
//   backward all-reduces the partial input gradient of the head's GEMM before the final norm's backward,
//   with the head's weight gradient behind it (as bwd_overlap does for QKV and FC1).
// Tied embeddings (GPT-2, Gemma): the head's weight is the embedding's shard E [V/tp, h], the same ids on
// the same rank, so the head computes x E^T (MatMulDgrad), its input gradient dlogits E (MatMul) and its
// weight gradient dlogits^T x (MatMulWgrad) straight into E's gradient; the embedding's backward, last in
// program order, adds its scatter to it.
// Sequence parallelism: the embedding's partial sums are reduce-scattered into the rank's rows of x0 (the
// positions added by each row's place in the layout); the final norm runs on the rank's rows and is gathered
// (kept for the head's weight gradient) before the head; backward reduce-scatters the head's partial input
// gradient, and gathers the residual gradient for the embedding's backward, which needs every row.
#include "sim/ir/schedule_builder_internal.hpp"

namespace domino::detail {

// An in-place AllReduce of a whole buffer on the communication stream (none when the plan switches
// communication off); returns its op index, or -1.
int32_t Builder::vocab_allreduce(Phase phase, Block block, const char* name, int32_t buf, ReduceOp reduce) {
  if (!plan_.comm_enabled) return -1;
  Op& op = emit(-1, phase, block, name, -1, -1, OpCode::AllReduce, Stream::Comm);
  in(op, whole(buf));
  out(op, whole(buf));
  op.attrs.reduce = reduce;
  return op.index;
}

void Builder::embedding_forward() {
  const Phase FW = Phase::Forward;
  {
    Op& op = emit(-1, FW, Block::Embedding, "", -1, -1, OpCode::EmbeddingFwd);
    in(op, whole(gb_.tokens));
    in(op, whole(gb_.param[TokEmb]));
    out(op, whole(sp_ ? gb_.sp_x : gb_.x0));
    op.attrs.vocab = int32_t(V_);
  }
  if (sp_) {
    sp_collective(OpCode::ReduceScatter, -1, FW, Block::Embedding, "rs", -1, -1, whole(gb_.sp_x),
                  whole(gb_.x0), int16_t(sp_groups_));
  } else {
    vocab_allreduce(FW, Block::Embedding, "ar", gb_.x0, ReduceOp::Sum);
  }
  if (gb_.param[PosEmb] >= 0) {
    // After the sum, so that the replicated positions are counted once.
    Op& op = emit(-1, FW, Block::Embedding, "pos", -1, -1, OpCode::PositionAdd);
    in(op, whole(gb_.x0));
    in(op, whole(gb_.param[PosEmb]));
    out(op, whole(gb_.x0));
    if (sp_) op.attrs.sp_groups = int16_t(sp_groups_);
  }
}

void Builder::head_forward(int32_t x_last) {
  const Phase FW = Phase::Forward;
  const Block H = Block::Head;
  {
    Op& op = emit(-1, FW, H, "norm", -1, -1, rms_ ? OpCode::RmsNormFwd : OpCode::LayerNormFwd);
    in(op, whole(x_last));
    in(op, whole(gb_.param[FinG]));
    if (layernorm_) in(op, whole(gb_.param[FinB]));
    out(op, whole(gb_.xf));
    out(op, whole(gb_.stf));
  }
  if (sp_)
    sp_collective(OpCode::AllGather, -1, FW, H, "norm.ag", -1, -1, whole(gb_.xf), whole(gb_.sp_x),
                  int16_t(sp_groups_));
  {
    const bool tied = m_.tied_embeddings;
    Op& op = emit(-1, FW, H, "logits", -1, -1, tied ? OpCode::MatMulDgrad : OpCode::MatMul);
    in(op, whole(sp_ ? gb_.sp_x : gb_.xf));
    in(op, whole(gb_.param[tied ? TokEmb : HeadW]));
    out(op, whole(gb_.logits));
    op.m = B_ * S_, op.k = h_, op.n = V_l_;
  }
  {
    Op& op = emit(-1, FW, H, "loss.max", -1, -1, OpCode::LogitMax);
    in(op, whole(gb_.logits));
    out(op, whole(gb_.loss_max));
    op.attrs.vocab = int32_t(V_);
  }
  vocab_allreduce(FW, H, "loss.max.ar", gb_.loss_max, ReduceOp::Max);
  {
    Op& op = emit(-1, FW, H, "loss.sum", -1, -1, OpCode::LogitSumExp);
    in(op, whole(gb_.logits));
    in(op, whole(gb_.targets));
    in(op, whole(gb_.loss_max));
    out(op, whole(gb_.loss_sums));
    op.attrs.vocab = int32_t(V_);
  }
  vocab_allreduce(FW, H, "loss.sum.ar", gb_.loss_sums, ReduceOp::Sum);
  {
    Op& op = emit(-1, FW, H, "loss", -1, -1, OpCode::CrossEntropy);
    in(op, whole(gb_.logits));
    in(op, whole(gb_.targets));
    in(op, whole(gb_.loss_max));
    in(op, whole(gb_.loss_sums));
    out(op, whole(gb_.loss));
    out(op, whole(gb_.dlogits));
    op.attrs.vocab = int32_t(V_);
  }
}

// The head is no block of the plan: its AllReduce follows the overlap settings of the block its backward
// hands over to, the last layer's MLP.
void Builder::head_backward(int32_t x_last) {
  const Phase BW = Phase::Backward;
  const Block H = Block::Head;
  const bool tied = m_.tied_embeddings;
  {
    Op& op = emit(-1, BW, H, "logits.dgrad", -1, -1, tied ? OpCode::MatMul : OpCode::MatMulDgrad);
    in(op, whole(gb_.dlogits));
    in(op, whole(gb_.param[tied ? TokEmb : HeadW]));
    out(op, whole(sp_ ? gb_.sp_dy : gb_.dxf));
    op.m = B_ * S_, op.n = h_, op.k = V_l_;
  }
  // Partial over the vocabulary shards (Megatron's "f" operator on the head's input).
  const int32_t ar = sp_ ? sp_collective(OpCode::ReduceScatter, -1, BW, H, "logits.rs", -1, -1,
                                         whole(gb_.sp_dy), whole(gb_.dxf), int16_t(sp_groups_))
                         : vocab_allreduce(BW, H, "logits.ar", gb_.dxf, ReduceOp::Sum);
  const int32_t xf = sp_ ? gb_.sp_x : gb_.xf;  // the gathered rows the forward kept
  {
    // First writer of a tied embedding's gradient: "=" (the embedding's backward adds to it).
    Op& op = emit(-1, BW, H, "logits.wgrad", -1, -1, OpCode::MatMulWgrad);
    in(op, whole(tied ? gb_.dlogits : xf));
    in(op, whole(tied ? xf : gb_.dlogits));
    out(op, whole(gb_.grad[tied ? TokEmb : HeadW]));
    op.m = tied ? V_l_ : h_, op.n = tied ? h_ : V_l_, op.k = B_ * S_;
    // With overlap none the norm below also waits for the AllReduce: it reads dxf, so it would anyway.
    const BlockPlan handover = m_.layers > 0 ? plan_.layers.back().mlp : BlockPlan{};
    after_input_grad_allreduces(op, ar >= 0 ? std::vector<int32_t>{ar} : std::vector<int32_t>{}, handover);
  }
  {
    // First writer of the residual-stream gradient: "=".
    Op& op = emit(-1, BW, H, "norm", -1, -1, rms_ ? OpCode::RmsNormBwd : OpCode::LayerNormBwd);
    in(op, whole(x_last));
    in(op, whole(gb_.stf));
    in(op, whole(gb_.param[FinG]));
    in(op, whole(gb_.dxf));
    out(op, whole(gb_.dresid));
    out(op, whole(gb_.grad[FinG]));
    if (layernorm_) out(op, whole(gb_.grad[FinB]));
  }
  if (sp_) sp_norm_grad_allreduces(-1, H, {gb_.grad[FinG], gb_.grad[FinB]});
}

// The residual gradient is replicated: each rank keeps its shard's rows, no collective. A tied head's
// weight gradient is already in the table's gradient: add to it (the positions' gradient starts here).
void Builder::embedding_backward() {
  if (sp_) {
    sp_collective(OpCode::AllGather, -1, Phase::Backward, Block::Embedding, "dy.ag", -1, -1,
                  whole(gb_.dresid), whole(gb_.sp_dy), int16_t(sp_groups_));
  }
  Op& op = emit(-1, Phase::Backward, Block::Embedding, "", -1, -1, OpCode::EmbeddingBwd);
  in(op, whole(gb_.tokens));
  in(op, whole(sp_ ? gb_.sp_dy : gb_.dresid));
  out(op, whole(gb_.grad[TokEmb]));
  if (gb_.grad[PosEmb] >= 0) out(op, whole(gb_.grad[PosEmb]));
  op.attrs.vocab = int32_t(V_);
  op.attrs.accumulate = m_.tied_embeddings;
}

}  // namespace domino::detail
