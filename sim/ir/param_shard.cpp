// param_shard.cpp: where each rank's local parameter shard sits in the full (unsharded) tensor, so that
// every rank and the tp=1 reference initialise identical full tensors (Megatron sharding):
// - QKV [h, (a+2kv)*d], columns [all Q heads | all K heads | all V heads]; rank r holds
//   [its a/tp Q heads | its K heads | its V heads]. With tp > kv_heads the KV heads are replicated:
//   rank r uses KV head r / (tp/kv_heads) (the group of its query heads).
// - proj [heads*head_dim, h] and fc2 [ffn, h]: row-parallel, rank r holds its rows (proj's rows are the
//   attention width, which differs from h when head_dim is decoupled, as in Gemma).
// - fc1 [h, ffn] (GeLU) or [h, 2*ffn] = [gate | up] (SwiGLU): rank r holds [gate_r | up_r].
// - Token embedding [V, h]: rank r holds rows [r*n, r*n + n); head [h, V]: columns [r*n, r*n + n), with
//   n = ModelSpec::vocab_per_rank() (vocab-parallel). The ids at or beyond V (tp not dividing V, or the
//   model's vocab_divisible_by) are padding: zero, never looked up, never a target (vocab_padding).
// - Column-parallel biases follow their columns; row-parallel biases, norms, positional embedding:
//   replicated. QK-norm gains: replicated (per head: [1, head_dim]; full, tp = 1 only: the projection's
//   width).
#include "sim/base/error.hpp"
#include "sim/ir/schedule.hpp"

namespace domino {
namespace {

// First KV head rank r holds.
int64_t kv_base(const ModelSpec& m, int rank) {
  if (m.kv_heads >= m.tp) return int64_t(rank) * m.kv_heads_per_rank();
  return rank / (m.tp / m.kv_heads);
}

int64_t qkv_full_col(const ModelSpec& m, int rank, int64_t col) {
  const int64_t d = m.head_dim(), a = m.heads, kv = m.kv_heads;
  const int64_t a_l = m.heads_per_rank(), kv_l = m.kv_heads_per_rank();
  if (col < a_l * d) return int64_t(rank) * a_l * d + col;
  col -= a_l * d;
  if (col < kv_l * d) return a * d + kv_base(m, rank) * d + col;
  col -= kv_l * d;
  return (a + kv) * d + kv_base(m, rank) * d + col;
}

int64_t fc1_full_col(const ModelSpec& m, int rank, int64_t col) {
  const int64_t f_l = m.ffn_per_rank();
  if (!m.gated() || col < f_l) return int64_t(rank) * f_l + col;
  return m.ffn_hidden + int64_t(rank) * f_l + (col - f_l);
}

}  // namespace

std::array<int64_t, 2> full_shape(const ModelSpec& m, const BufferDesc& buf) {
  const int64_t h = m.hidden, qkv = int64_t(m.heads + 2 * m.kv_heads) * m.head_dim();
  const int64_t fc1 = m.gated() ? 2 * int64_t(m.ffn_hidden) : m.ffn_hidden;
  switch (buf.param) {
    case ParamKind::QkvWeight:
      return {h, qkv};
    case ParamKind::QkvBias:
      return {1, qkv};
    case ParamKind::ProjWeight:
      return {m.attn_width(), h};
    case ParamKind::QNormGamma:
      return {1, m.qk_norm == QkNorm::Full ? m.attn_width() : m.head_dim()};
    case ParamKind::KNormGamma:
      return {1, m.qk_norm == QkNorm::Full ? int64_t(m.kv_heads) * m.head_dim() : m.head_dim()};
    case ParamKind::Fc1Weight:
      return {h, fc1};
    case ParamKind::Fc1Bias:
      return {1, fc1};
    case ParamKind::Fc2Weight:
      return {m.ffn_hidden, h};
    case ParamKind::ProjBias:
    case ParamKind::Fc2Bias:
    case ParamKind::AttnNormGamma:
    case ParamKind::AttnNormBeta:
    case ParamKind::MlpNormGamma:
    case ParamKind::MlpNormBeta:
    case ParamKind::FinalNormGamma:
    case ParamKind::FinalNormBeta:
    case ParamKind::AttnPostNormGamma:
    case ParamKind::AttnPostNormBeta:
    case ParamKind::MlpPostNormGamma:
    case ParamKind::MlpPostNormBeta:
      return {1, h};
    case ParamKind::TokenEmbedding:
      return {m.vocab, h};
    case ParamKind::PositionEmbedding:
      return {m.seq_len, h};
    case ParamKind::HeadWeight:
      return {h, m.vocab};
    case ParamKind::None:
      break;
  }
  throw_runtime("full_shape: buffer '" + buf.name + "' holds no parameter");
}

bool vocab_padding(const ModelSpec& m, const BufferDesc& buf, const ParamCoord& at) {
  if (buf.param == ParamKind::TokenEmbedding) return at.row >= m.vocab;
  if (buf.param == ParamKind::HeadWeight) return at.col >= m.vocab;
  return false;
}

ParamCoord shard_of(const ModelSpec& m, const BufferDesc& buf, int rank, int64_t row, int64_t col) {
  if (rank < 0 || rank >= m.tp) {
    throw_runtime("shard_of: rank " + std::to_string(rank) + " outside tp group of " + std::to_string(m.tp));
  }
  if (row < 0 || row >= buf.seq || col < 0 || col >= buf.cols) {
    throw_runtime("shard_of: (" + std::to_string(row) + ", " + std::to_string(col) + ") outside buffer '" +
                  buf.name + "'");
  }
  const int64_t rows_per_rank_attn = int64_t(m.heads_per_rank()) * m.head_dim();
  switch (buf.param) {
    case ParamKind::QkvWeight:
    case ParamKind::QkvBias:
      return {row, qkv_full_col(m, rank, col)};
    case ParamKind::ProjWeight:
      return {int64_t(rank) * rows_per_rank_attn + row, col};
    case ParamKind::Fc1Weight:
    case ParamKind::Fc1Bias:
      return {row, fc1_full_col(m, rank, col)};
    case ParamKind::Fc2Weight:
      return {int64_t(rank) * m.ffn_per_rank() + row, col};
    case ParamKind::TokenEmbedding:
      return {int64_t(rank) * m.vocab_per_rank() + row, col};
    case ParamKind::HeadWeight:
      return {row, int64_t(rank) * m.vocab_per_rank() + col};
    case ParamKind::None:
      throw_runtime("shard_of: buffer '" + buf.name + "' holds no parameter");
    default:
      return {row, col};  // replicated
  }
}

}  // namespace domino
