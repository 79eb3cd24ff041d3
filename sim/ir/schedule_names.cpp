// schedule_names.cpp: names of the IR's enums, the opcode -> kind table, and op ids
// ("L3.bwd.mlp.fc2.dgrad.s1").
#include <string>

#include "sim/ir/schedule.hpp"

namespace domino {

const char* to_string(Stream s) { return s == Stream::Compute ? "compute" : "comm"; }

const char* to_string(Phase p) {
  switch (p) {
    case Phase::Forward:
      return "fwd";
    case Phase::Backward:
      return "bwd";
    case Phase::Optimizer:
      return "opt";
  }
  return "?";
}

const char* to_string(Block b) {
  switch (b) {
    case Block::Attn:
      return "attn";
    case Block::Mlp:
      return "mlp";
    case Block::Embedding:
      return "emb";
    case Block::Head:
      return "head";
    case Block::None:
      return "none";
  }
  return "?";
}

bool memory_bound(OpKind k) { return k != OpKind::Gemm && k != OpKind::Attention && k != OpKind::AllReduce; }

const char* to_string(OpKind k) {
  switch (k) {
    case OpKind::Gemm:
      return "gemm";
    case OpKind::Attention:
      return "attention";
    case OpKind::Norm:
      return "norm";
    case OpKind::Activation:
      return "activation";
    case OpKind::Elementwise:
      return "elementwise";
    case OpKind::Copy:
      return "copy";
    case OpKind::AllReduce:
      return "allreduce";
    case OpKind::Optimizer:
      return "optimizer";
    case OpKind::Embedding:
      return "embedding";
    case OpKind::Loss:
      return "loss";
  }
  return "?";
}

const char* to_string(OpCode c) {
  switch (c) {
    case OpCode::MatMul:
      return "MatMul";
    case OpCode::MatMulDgrad:
      return "MatMulDgrad";
    case OpCode::MatMulWgrad:
      return "MatMulWgrad";
    case OpCode::LayerNormFwd:
      return "LayerNormFwd";
    case OpCode::RmsNormFwd:
      return "RmsNormFwd";
    case OpCode::LayerNormBwd:
      return "LayerNormBwd";
    case OpCode::RmsNormBwd:
      return "RmsNormBwd";
    case OpCode::GeluFwd:
      return "GeluFwd";
    case OpCode::GeluBwd:
      return "GeluBwd";
    case OpCode::SwigluFwd:
      return "SwigluFwd";
    case OpCode::SwigluBwd:
      return "SwigluBwd";
    case OpCode::RopeFwd:
      return "RopeFwd";
    case OpCode::RopeBwd:
      return "RopeBwd";
    case OpCode::AttnFwd:
      return "AttnFwd";
    case OpCode::AttnBwd:
      return "AttnBwd";
    case OpCode::ResidualAdd:
      return "ResidualAdd";
    case OpCode::EmbeddingFwd:
      return "EmbeddingFwd";
    case OpCode::EmbeddingBwd:
      return "EmbeddingBwd";
    case OpCode::CrossEntropy:
      return "CrossEntropy";
    case OpCode::AllReduce:
      return "AllReduce";
    case OpCode::AdamStep:
      return "AdamStep";
    case OpCode::SgdStep:
      return "SgdStep";
  }
  return "?";
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
      return OpKind::Embedding;
    case OpCode::CrossEntropy:
      return OpKind::Loss;
    case OpCode::AllReduce:
      return OpKind::AllReduce;
    case OpCode::AdamStep:
    case OpCode::SgdStep:
      return OpKind::Optimizer;
  }
  return OpKind::Elementwise;
}

const char* to_string(BufferRole r) {
  switch (r) {
    case BufferRole::Param:
      return "param";
    case BufferRole::Grad:
      return "grad";
    case BufferRole::OptState:
      return "opt_state";
    case BufferRole::Activation:
      return "activation";
    case BufferRole::Workspace:
      return "workspace";
    case BufferRole::Data:
      return "data";
  }
  return "?";
}

const char* to_string(ParamKind k) {
  switch (k) {
    case ParamKind::None:
      return "none";
    case ParamKind::QkvWeight:
      return "qkv_weight";
    case ParamKind::QkvBias:
      return "qkv_bias";
    case ParamKind::ProjWeight:
      return "proj_weight";
    case ParamKind::ProjBias:
      return "proj_bias";
    case ParamKind::Fc1Weight:
      return "fc1_weight";
    case ParamKind::Fc1Bias:
      return "fc1_bias";
    case ParamKind::Fc2Weight:
      return "fc2_weight";
    case ParamKind::Fc2Bias:
      return "fc2_bias";
    case ParamKind::AttnNormGamma:
      return "attn_norm_gamma";
    case ParamKind::AttnNormBeta:
      return "attn_norm_beta";
    case ParamKind::MlpNormGamma:
      return "mlp_norm_gamma";
    case ParamKind::MlpNormBeta:
      return "mlp_norm_beta";
    case ParamKind::FinalNormGamma:
      return "final_norm_gamma";
    case ParamKind::FinalNormBeta:
      return "final_norm_beta";
    case ParamKind::TokenEmbedding:
      return "token_embedding";
    case ParamKind::PositionEmbedding:
      return "position_embedding";
    case ParamKind::HeadWeight:
      return "head_weight";
  }
  return "?";
}

// Layer ops:      L<layer>.<fwd|bwd>.<attn|mlp>.<name>.s<slice>[.c<chunk>]
// Layer params:   L<layer>.opt.<name>
// Outside layers: <emb|head>.<fwd|bwd|opt>[.<name>], and "head.loss" for the loss.
std::string op_id(const Op& op) {
  std::string id;
  id.reserve(40);
  if (op.code == OpCode::CrossEntropy) return "head.loss";
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
