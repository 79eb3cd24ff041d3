// schedule_names.cpp: names of the IR's enums, the opcode -> kind and activation -> opcode tables, and op
// ids ("L3.bwd.mlp.fc2.dgrad.s1").
#include <fmt/format.h>

#include <string>

#include "sim/base/enum_names.hpp"
#include "sim/base/error.hpp"
#include "sim/ir/schedule.hpp"

namespace domino {

const char* to_string(Stream s) { return s == Stream::Compute ? "compute" : "comm"; }

constexpr std::array<const char*, 4> kPhaseNames = {"fwd", "bwd", "opt", "rc"};
static_assert(size_t(Phase::Recompute) + 1 == kPhaseNames.size(), "one name per Phase, in declaration order");
const char* to_string(Phase p) { return enum_name(p, kPhaseNames); }

constexpr std::array<const char*, 5> kBlockNames = {"attn", "mlp", "emb", "head", "none"};
static_assert(size_t(Block::None) + 1 == kBlockNames.size(), "one name per Block, in declaration order");
const char* to_string(Block b) { return enum_name(b, kBlockNames); }

constexpr std::array<const char*, 12> kOpKindNames = {
    "gemm", "attention", "norm", "activation", "elementwise", "copy", "allreduce", "optimizer", "embedding", "loss",
    "allgather", "reducescatter"};
static_assert(size_t(OpKind::ReduceScatter) + 1 == kOpKindNames.size(), "one name per OpKind, in declaration order");
const char* to_string(OpKind k) { return enum_name(k, kOpKindNames); }

const std::map<std::string, OpKind>& kinds_by_name() {
  static const std::map<std::string, OpKind> m = [] {
    std::map<std::string, OpKind> out;
    for (size_t i = 0; i < kOpKindNames.size(); ++i) out[kOpKindNames[i]] = OpKind(i);
    return out;
  }();
  return m;
}

constexpr std::array<const char*, 31> kOpCodeNames = {
    "MatMul",       "MatMulDgrad", "MatMulWgrad",  "LayerNormFwd", "RmsNormFwd",   "LayerNormBwd",
    "RmsNormBwd",   "GeluFwd",     "GeluBwd",      "SwigluFwd",    "SwigluBwd",    "RopeFwd",
    "RopeBwd",      "AttnFwd",     "AttnBwd",      "ResidualAdd",  "EmbeddingFwd", "EmbeddingBwd",
    "PositionAdd",  "LogitMax",    "LogitSumExp",  "CrossEntropy", "AllReduce",    "AdamStep",
    "SgdStep",      "ReluFwd",     "ReluBwd",      "GegluFwd",     "GegluBwd",
    "AllGather",    "ReduceScatter"};
static_assert(size_t(OpCode::ReduceScatter) + 1 == kOpCodeNames.size(),
              "one name per OpCode, in declaration order");
const char* to_string(OpCode c) { return enum_name(c, kOpCodeNames); }

constexpr std::array<const char*, 2> kReduceOpNames = {"sum", "max"};
static_assert(size_t(ReduceOp::Max) + 1 == kReduceOpNames.size(), "one name per ReduceOp, in declaration order");
const char* to_string(ReduceOp r) { return enum_name(r, kReduceOpNames); }

constexpr std::array<const char*, 2> kOptimizerNames = {"adam", "sgd"};
static_assert(size_t(OptimizerKind::SgdMomentum) + 1 == kOptimizerNames.size(),
              "one name per OptimizerKind, in declaration order");
const char* to_string(OptimizerKind k) { return enum_name(k, kOptimizerNames); }
std::optional<OptimizerKind> optimizer_kind_named(const std::string& name) {
  return enum_named<OptimizerKind>(name, kOptimizerNames);
}

OpKind kind_of(OpCode c) {
  switch (c) {
    case OpCode::MatMul:
    case OpCode::MatMulDgrad:
    case OpCode::MatMulWgrad:
      return OpKind::Gemm;
    case OpCode::LayerNormFwd:
    case OpCode::RmsNormFwd:
    case OpCode::LayerNormBwd:
    case OpCode::RmsNormBwd:
      return OpKind::Norm;
    case OpCode::GeluFwd:
    case OpCode::GeluBwd:
    case OpCode::SwigluFwd:
    case OpCode::SwigluBwd:
    case OpCode::ReluFwd:
    case OpCode::ReluBwd:
    case OpCode::GegluFwd:
    case OpCode::GegluBwd:
      return OpKind::Activation;
    case OpCode::RopeFwd:
    case OpCode::RopeBwd:
    case OpCode::ResidualAdd:
      return OpKind::Elementwise;
    case OpCode::AttnFwd:
    case OpCode::AttnBwd:
      return OpKind::Attention;
    case OpCode::EmbeddingFwd:
    case OpCode::EmbeddingBwd:
    case OpCode::PositionAdd:
      return OpKind::Embedding;
    case OpCode::LogitMax:
    case OpCode::LogitSumExp:
    case OpCode::CrossEntropy:
      return OpKind::Loss;
    case OpCode::AllReduce:
      return OpKind::AllReduce;
    case OpCode::AllGather:
      return OpKind::AllGather;
    case OpCode::ReduceScatter:
      return OpKind::ReduceScatter;
    case OpCode::AdamStep:
    case OpCode::SgdStep:
      return OpKind::Optimizer;
  }
  return OpKind::Elementwise;
}

ActivationCodes activation_codes(Activation a) {
  switch (a) {
    case Activation::Gelu: return {OpCode::GeluFwd, OpCode::GeluBwd};
    case Activation::Swiglu: return {OpCode::SwigluFwd, OpCode::SwigluBwd};
    case Activation::Relu: return {OpCode::ReluFwd, OpCode::ReluBwd};
    case Activation::Geglu: return {OpCode::GegluFwd, OpCode::GegluBwd};
  }
  throw_bad_input(fmt::format("unknown activation {}", int(a)));
}

constexpr std::array<const char*, 6> kBufferRoleNames = {"param",      "grad",      "opt_state",
                                                         "activation", "workspace", "data"};
static_assert(size_t(BufferRole::Data) + 1 == kBufferRoleNames.size(),
              "one name per BufferRole, in declaration order");
const char* to_string(BufferRole r) { return enum_name(r, kBufferRoleNames); }

constexpr std::array<const char*, 24> kParamKindNames = {"none",
                                                         "qkv_weight",
                                                         "qkv_bias",
                                                         "proj_weight",
                                                         "proj_bias",
                                                         "fc1_weight",
                                                         "fc1_bias",
                                                         "fc2_weight",
                                                         "fc2_bias",
                                                         "attn_norm_gamma",
                                                         "attn_norm_beta",
                                                         "mlp_norm_gamma",
                                                         "mlp_norm_beta",
                                                         "final_norm_gamma",
                                                         "final_norm_beta",
                                                         "token_embedding",
                                                         "position_embedding",
                                                         "head_weight",
                                                         "q_norm_gamma",
                                                         "k_norm_gamma",
                                                         "attn_post_norm_gamma",
                                                         "attn_post_norm_beta",
                                                         "mlp_post_norm_gamma",
                                                         "mlp_post_norm_beta"};
static_assert(size_t(ParamKind::MlpPostNormBeta) + 1 == kParamKindNames.size(),
              "one name per ParamKind, in declaration order");
const char* to_string(ParamKind k) { return enum_name(k, kParamKindNames); }

// Layer ops:      L<layer>.<fwd|bwd|rc>.<attn|mlp>.<name>.s<slice>[.c<chunk>] (rc: forward ops recomputed)
// Layer params:   L<layer>.opt.<name>
// Outside layers: <emb|head>.<fwd|bwd|opt>[.<name>], and "head.loss" for the loss.
std::string op_id(const Op& op) {
  std::string id;
  id.reserve(40);
  if (op.code == OpCode::CrossEntropy && op.layer < 0) return "head.loss";  // copies (profiler chains) carry a layer
  if (op.layer >= 0) {
    id.append("L").append(std::to_string(op.layer)).append(".").append(to_string(op.phase));
    if (op.phase != Phase::Optimizer) id.append(".").append(to_string(op.block));
  } else {
    id.append(to_string(op.block)).append(".").append(to_string(op.phase));
  }
  if (op.name && op.name[0]) id.append(".").append(op.name);
  if (op.slice >= 0) id.append(".s").append(std::to_string(op.slice));
  if (op.chunk >= 0) id.append(".c").append(std::to_string(op.chunk));
  return id;
}

}  // namespace domino
