// cpu_ops.cpp: entry points of the CPU backend: validation of ops against the IR's contract (the one
// verifier, sim/ir/verify.hpp) and dispatch of each opcode to its kernel (cpu_gemm, cpu_norm,
// cpu_activation, cpu_attention, cpu_elementwise, cpu_embedding, cpu_loss, cpu_optimizer).
#include "executor/cpu/cpu_ops.hpp"

#include <fmt/format.h>

#include <string>

#include "executor/cpu/cpu_views.hpp"
#include "sim/base/error.hpp"
#include "sim/ir/verify.hpp"

namespace domino {

void run_cpu_op(const Op& op, const CpuOpContext& ctx) {
  if (!ctx.schedule) throw_runtime(fmt::format("op {}: CPU context has no schedule", op_id(op)));
  const Schedule& s = *ctx.schedule;
  if (ctx.buffers.size() != s.buffers.size()) {
    throw_runtime(fmt::format("op {}: CPU context has {} buffers for a schedule of {}", op_id(op), ctx.buffers.size(),
                              s.buffers.size()));
  }
  // A Runtime error here: run_cpu_op is handed ops one at a time, after the schedule was verified.
  const std::string problem = op_contract_problem(s, op);
  if (!problem.empty()) throw_runtime(fmt::format("op {} (#{}) {}", op_id(op), op.index, problem));
  for (int i = 0; i < op.n_in + op.n_out; ++i) {
    const Region& r = i < op.n_in ? op.in[size_t(i)] : op.out[size_t(i - op.n_in)];
    if (!ctx.buffers[size_t(r.buffer)]) {
      throw_runtime(fmt::format("op {}: buffer '{}' is not allocated", op_id(op), s.buffers[size_t(r.buffer)].name));
    }
  }
  switch (op.code) {
    case OpCode::MatMul: return cpu::matmul(op, ctx);
    case OpCode::MatMulDgrad: return cpu::matmul_dgrad(op, ctx);
    case OpCode::MatMulWgrad: return cpu::matmul_wgrad(op, ctx);
    case OpCode::LayerNormFwd: return cpu::norm_fwd(op, ctx, true);
    case OpCode::RmsNormFwd: return cpu::norm_fwd(op, ctx, false);
    case OpCode::LayerNormBwd: return cpu::norm_bwd(op, ctx, true);
    case OpCode::RmsNormBwd: return cpu::norm_bwd(op, ctx, false);
    case OpCode::GeluFwd: return cpu::gelu_fwd(op, ctx);
    case OpCode::GeluBwd: return cpu::gelu_bwd(op, ctx);
    case OpCode::SwigluFwd: return cpu::swiglu_fwd(op, ctx);
    case OpCode::SwigluBwd: return cpu::swiglu_bwd(op, ctx);
    case OpCode::RopeFwd: return cpu::rope(op, ctx, false);
    case OpCode::RopeBwd: return cpu::rope(op, ctx, true);
    case OpCode::AttnFwd: return cpu::attn_fwd(op, ctx);
    case OpCode::AttnBwd: return cpu::attn_bwd(op, ctx);
    case OpCode::ResidualAdd: return cpu::residual_add(op, ctx);
    case OpCode::EmbeddingFwd: return cpu::embedding_fwd(op, ctx);
    case OpCode::EmbeddingBwd: return cpu::embedding_bwd(op, ctx);
    case OpCode::PositionAdd: return cpu::position_add(op, ctx);
    case OpCode::LogitMax: return cpu::logit_max(op, ctx);
    case OpCode::LogitSumExp: return cpu::logit_sum_exp(op, ctx);
    case OpCode::CrossEntropy: return cpu::cross_entropy(op, ctx);
    case OpCode::AdamStep: return cpu::adam_step(op, ctx);
    case OpCode::SgdStep: return cpu::sgd_step(op, ctx);
    case OpCode::ReluFwd: return cpu::relu_fwd(op, ctx);
    case OpCode::ReluBwd: return cpu::relu_bwd(op, ctx);
    case OpCode::GegluFwd: return cpu::geglu_fwd(op, ctx);
    case OpCode::GegluBwd: return cpu::geglu_bwd(op, ctx);
    case OpCode::AllReduce:
    case OpCode::AllGather:
    case OpCode::ReduceScatter:
      throw_runtime(fmt::format("op {}: {} is a collective, not a CPU compute op", op_id(op), to_string(op.code)));
  }
  throw_runtime(fmt::format("op {}: unknown opcode {}", op_id(op), int(op.code)));
}

}  // namespace domino
