// cuda_op_dispatch.cpp: enqueues one IR op on a CUDA stream: cuBLAS for GEMMs and attention, our kernels
// for the rest, collectives through cuda_collectives.cpp. Semantics are those of sim/ir/schedule.hpp; ops
// arrive verified (sim/ir/verify.hpp, run by the rank runner), so operand counts and shapes hold here.
// One function per opcode family; run_op only dispatches.
#include <string>

#include "executor/cuda/cuda_device_state.hpp"
#include "executor/cuda/cuda_gemm.hpp"
#include "executor/runtime/check.hpp"
#include "executor/runtime/sp_collective.hpp"
#include "sim/base/error.hpp"

namespace domino::cuda {
namespace {

// One op about to be enqueued: its device views, stream and cuBLAS handle.
struct Launch {
  DeviceState& dev;
  const Op& op;
  cudaStream_t s;
  void* cublas;
  DevView in(int i) const { return dev.view(op.in[size_t(i)]); }
  DevView out(int i) const { return dev.view(op.out[size_t(i)]); }
  bool accumulate() const { return op.attrs.accumulate; }
};

void run_gemm(const Launch& l) {
  const Op& op = l.op;
  switch (op.code) {
    case OpCode::MatMul:
      matmul(l.cublas, l.in(0), l.in(1), l.out(0), l.accumulate());
      if (op.n_in > 2) add_bias(l.out(0), l.in(2), l.s);
      return;
    case OpCode::MatMulDgrad:
      matmul_dgrad(l.cublas, l.in(0), l.in(1), l.out(0), l.accumulate());
      return;
    default:  // MatMulWgrad
      matmul_wgrad(l.cublas, l.in(0), l.in(1), l.out(0), l.accumulate());
      if (op.n_out > 1) bias_grad(l.in(1), l.out(1), l.accumulate(), l.dev.reduce_scratch, l.s);
      return;
  }
}

// Batch entry b of v with each row cut into `groups` rows of ncols / groups columns: a grouped norm
// (QK-norm per head, attrs.head_dim > 0) normalises each group as a row of its own.
DevView grouped(const DevView& v, int64_t b, int64_t groups) {
  DevView g = v;
  g.base = static_cast<char*>(v.base) + b * v.batch_stride * elt_bytes(v.elt);
  g.ncols = v.ncols / groups;
  g.nbatch = v.rows_per_batch;
  g.batch_stride = v.row_stride;
  g.rows_per_batch = groups;
  g.row_stride = g.ncols;
  g.seq0 = 0;
  return g;
}

int64_t norm_groups(const Launch& l) {
  const int64_t g = l.op.attrs.head_dim;
  return g > 0 ? l.op.in[0].cols() / g : 1;
}

void run_norm_fwd(const Launch& l) {
  NormFwdArgs a;
  a.rms = l.op.code == OpCode::RmsNormFwd;
  a.x = l.in(0), a.gamma = l.in(1);
  const DevView beta = a.rms ? DevView{} : l.in(2);
  a.beta = a.rms ? nullptr : &beta;
  a.y = l.out(0), a.stats = l.out(1);
  a.eps = l.op.attrs.eps;
  const int64_t groups = norm_groups(l);
  if (groups == 1) return norm_fwd(a, l.s);
  const DevView x = a.x, y = a.y, stats = a.stats;
  for (int64_t b = 0; b < x.nbatch; ++b) {
    a.x = grouped(x, b, groups), a.y = grouped(y, b, groups), a.stats = grouped(stats, b, groups);
    norm_fwd(a, l.s);
  }
}

void run_norm_bwd(const Launch& l) {
  NormBwdArgs a;
  a.rms = l.op.code == OpCode::RmsNormBwd;
  a.x = l.in(0), a.stats = l.in(1), a.gamma = l.in(2);
  DevView dy[kMaxIn];
  a.n_chunks = l.op.attrs.chunks;
  for (int c = 0; c < a.n_chunks; ++c) dy[c] = l.in(3 + c);
  a.dy_chunks = dy;
  a.dx = l.out(0), a.accumulate = l.accumulate();
  a.dgamma = l.out(1);
  const DevView dbeta = a.rms ? DevView{} : l.out(2);
  a.dbeta = a.rms ? nullptr : &dbeta;
  a.accumulate_params = l.op.attrs.accumulate_params;
  a.scratch = l.dev.reduce_scratch;
  const int64_t groups = norm_groups(l);
  if (groups == 1) return norm_bwd(a, l.s);
  // One dy chunk (the verifier's rule); every batch entry after the first adds to the gains' gradients.
  const DevView x = a.x, stats = a.stats, dy0 = dy[0], dx = a.dx;
  for (int64_t b = 0; b < x.nbatch; ++b) {
    a.x = grouped(x, b, groups), a.stats = grouped(stats, b, groups), a.dx = grouped(dx, b, groups);
    dy[0] = grouped(dy0, b, groups);
    a.accumulate_params = l.op.attrs.accumulate_params || b > 0;
    norm_bwd(a, l.s);
  }
}

void run_activation(const Launch& l) {
  const Op& op = l.op;
  switch (op.code) {
    case OpCode::GeluFwd: return gelu_fwd(l.in(0), l.out(0), l.s);
    case OpCode::GeluBwd: return gelu_bwd(l.in(0), l.in(1), l.out(0), l.s);
    case OpCode::SwigluFwd: return swiglu_fwd(l.in(0), l.out(0), l.s);
    case OpCode::SwigluBwd: return swiglu_bwd(l.in(0), l.in(1), l.out(0), l.s);
    case OpCode::ReluFwd: return relu_fwd(l.in(0), l.out(0), l.s);
    case OpCode::ReluBwd: return relu_bwd(l.in(0), l.in(1), l.out(0), l.s);
    case OpCode::GegluFwd: return geglu_fwd(l.in(0), l.out(0), l.s);
    case OpCode::GegluBwd: return geglu_bwd(l.in(0), l.in(1), l.out(0), l.s);
    default:  // RopeFwd, RopeBwd: in place on out[0]
      return rope(l.out(0), op.attrs.heads, op.attrs.head_dim, op.attrs.rotary_dims, op.code == OpCode::RopeBwd, l.s);
  }
}

void run_attention(const Launch& l) {
  const Op& op = l.op;
  const bool fwd = op.code == OpCode::AttnFwd;
  const BufferDesc& probs = l.dev.schedule->buffers[size_t(fwd ? op.out[1].buffer : op.in[3].buffer)];
  const AttnShape shape{op.attrs.heads, op.attrs.kv_heads, op.attrs.head_dim, probs.cols / op.attrs.heads,
                        op.attrs.window};
  if (fwd) {
    AttentionFwdArgs a;
    a.q = l.in(0), a.k = l.in(1), a.v = l.in(2);
    a.p = l.out(1), a.ctx = l.out(0);
    a.shape = shape;
    return attention_fwd(l.cublas, l.s, a);
  }
  AttentionBwdArgs a;
  a.q = l.in(0), a.k = l.in(1), a.v = l.in(2), a.p = l.in(3), a.dctx = l.in(4);
  a.dq = l.out(0), a.dk = l.out(1), a.dv = l.out(2);
  a.accumulate = l.accumulate();
  a.overwrite_end = op.attrs.overwrite_end;
  a.shape = shape;
  a.dp_scratch = l.dev.attn_scratch;
  attention_bwd(l.cublas, l.s, a);
}

void run_residual_add(const Launch& l) {
  const bool has_bias = l.op.n_in > 2;
  const DevView bias = has_bias ? l.in(2) : DevView{};
  residual_add(l.in(0), l.in(1), has_bias ? &bias : nullptr, l.out(0), l.s);
}

void run_embedding(const Launch& l) {
  const Op& op = l.op;
  if (op.code == OpCode::PositionAdd) {
    RowPositions at;
    if (op.attrs.sp_groups > 0) {  // a sequence-sharded buffer: each local row at its group layout position
      const SpLayout layout = sp_position_layout(*l.dev.schedule, op);
      at = {layout.part(), layout.seq / layout.groups, l.dev.rank % layout.tp};
    }
    return position_add(l.in(0), l.in(1), l.out(0), at, l.s);
  }
  const int64_t table_rows = op.code == OpCode::EmbeddingFwd ? op.in[1].rows() : op.out[0].rows();
  const int64_t first = vocab_shard(op.attrs, l.dev.rank, table_rows).first;
  if (op.code == OpCode::EmbeddingFwd) {
    EmbeddingFwdArgs a;
    a.tokens = l.in(0), a.table = l.in(1), a.out = l.out(0), a.first = first;
    return embedding_fwd(a, l.s);
  }
  EmbeddingBwdArgs a;
  a.tokens = l.in(0), a.dy = l.in(1), a.dtable = l.out(0), a.first = first;
  const DevView dpos = op.n_out > 1 ? l.out(1) : DevView{};
  a.dpos = op.n_out > 1 ? &dpos : nullptr;
  a.accumulate = l.accumulate();
  a.accumulate_pos = op.attrs.accumulate_params;
  a.fp32_scratch = l.dev.embed_scratch;
  embedding_bwd(a, l.s);
}

// LogitMax, LogitSumExp, CrossEntropy: this rank's vocabulary shard of the logits.
void run_loss(const Launch& l) {
  const Op& op = l.op;
  const VocabShard shard = vocab_shard(op.attrs, l.dev.rank, op.in[0].cols());
  VocabLossArgs a;
  a.logits = l.in(0), a.first = shard.first, a.real = shard.real();
  if (op.code == OpCode::LogitMax) {
    a.max = l.out(0);
    return logit_max(a, l.s);
  }
  a.targets = l.in(1), a.max = l.in(2);
  if (op.code == OpCode::LogitSumExp) {
    a.sums = l.out(0);
    return logit_sum_exp(a, l.s);
  }
  a.sums = l.in(3), a.loss = l.out(0), a.dlogits = l.out(1);
  // Averaged over every token of the logits buffer (a sliced op holds only part of them), as the CPU.
  const BufferDesc& b = l.dev.schedule->buffers[size_t(op.in[0].buffer)];
  a.tokens = double(b.batch * b.seq);
  a.accumulate = l.accumulate();
  a.scratch = l.dev.reduce_scratch;
  vocab_cross_entropy(a, l.s);
}

void run_optimizer(const Launch& l) {
  const Op& op = l.op;
  DeviceState& dev = l.dev;
  const int32_t p = op.out[0].buffer;
  const int64_t n = dev.schedule->buffers[size_t(p)].elements();
  const OptimizerHyper& o = dev.hyper;
  float* first_state = static_cast<float*>(dev.ptr[size_t(op.out[1].buffer)]);
  if (op.code == OpCode::SgdStep) {
    SgdStepArgs a;
    a.grad = l.in(0), a.param = l.out(0), a.master = dev.master[size_t(p)], a.mom = first_state, a.n = n;
    a.lr = o.lr, a.momentum = o.momentum, a.weight_decay = op.attrs.weight_decay ? o.weight_decay : 0.0f;
    return sgd_step(a, l.s);
  }
  AdamStepArgs a;
  a.grad = l.in(0), a.param = l.out(0), a.master = dev.master[size_t(p)];
  a.m = first_state, a.v = static_cast<float*>(dev.ptr[size_t(op.out[2].buffer)]), a.n = n;
  a.lr = o.lr, a.beta1 = o.beta1, a.beta2 = o.beta2, a.eps = o.eps;
  a.weight_decay = op.attrs.weight_decay ? o.weight_decay : 0.0f;
  a.step = dev.step;
  adam_step(a, l.s);
}

}  // namespace

void run_op(DeviceState& dev, const Op& op, Stream stream) {
  const Launch l{dev, op, dev.stream(stream), dev.cublas[static_cast<int>(stream)]};
  switch (op.code) {
    case OpCode::MatMul:
    case OpCode::MatMulDgrad:
    case OpCode::MatMulWgrad: return run_gemm(l);
    case OpCode::LayerNormFwd:
    case OpCode::RmsNormFwd: return run_norm_fwd(l);
    case OpCode::LayerNormBwd:
    case OpCode::RmsNormBwd: return run_norm_bwd(l);
    case OpCode::GeluFwd:
    case OpCode::GeluBwd:
    case OpCode::SwigluFwd:
    case OpCode::SwigluBwd:
    case OpCode::ReluFwd:
    case OpCode::ReluBwd:
    case OpCode::GegluFwd:
    case OpCode::GegluBwd:
    case OpCode::RopeFwd:
    case OpCode::RopeBwd: return run_activation(l);
    case OpCode::AttnFwd:
    case OpCode::AttnBwd: return run_attention(l);
    case OpCode::ResidualAdd: return run_residual_add(l);
    case OpCode::EmbeddingFwd:
    case OpCode::EmbeddingBwd:
    case OpCode::PositionAdd: return run_embedding(l);
    case OpCode::LogitMax:
    case OpCode::LogitSumExp:
    case OpCode::CrossEntropy: return run_loss(l);
    case OpCode::AllReduce:
    case OpCode::AllGather:
    case OpCode::ReduceScatter: return run_collective(dev, op, stream);
    case OpCode::AdamStep:
    case OpCode::SgdStep: return run_optimizer(l);
  }
  throw_runtime("op " + op_id(op) + ": unknown opcode " + std::to_string(int(op.code)));
}

}  // namespace domino::cuda
