// param_init.cpp: seeded, shard-independent initial values (see param_init.hpp).
#include "executor/runtime/param_init.hpp"

#include <algorithm>
#include <cmath>

#include "sim/base/error.hpp"

namespace domino {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hash_of(uint64_t seed, uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  return mix(mix(mix(mix(mix(seed) ^ a) ^ b) ^ c) ^ d);
}

// Uniform in [-1, 1) from the top 24 bits: exact in float.
float symmetric_unit(uint64_t h) { return float(int64_t(h >> 40) - (int64_t(1) << 23)) / float(1 << 23); }

bool is_gamma(ParamKind k) {
  return k == ParamKind::AttnNormGamma || k == ParamKind::MlpNormGamma || k == ParamKind::FinalNormGamma ||
         k == ParamKind::QNormGamma || k == ParamKind::KNormGamma ||
         k == ParamKind::AttnPostNormGamma || k == ParamKind::MlpPostNormGamma;
}

bool is_zero_init(ParamKind k) {
  switch (k) {
    case ParamKind::QkvBias: case ParamKind::ProjBias: case ParamKind::Fc1Bias: case ParamKind::Fc2Bias:
    case ParamKind::AttnNormBeta: case ParamKind::MlpNormBeta: case ParamKind::FinalNormBeta:
    case ParamKind::AttnPostNormBeta: case ParamKind::MlpPostNormBeta:
      return true;
    default:
      return false;
  }
}

void init_param(const Schedule& s, const BufferDesc& buf, int rank, uint64_t seed, float* out) {
  if (is_gamma(buf.param) || is_zero_init(buf.param) || buf.param == ParamKind::None) {
    std::fill_n(out, buf.elements(), is_gamma(buf.param) ? 1.0f : 0.0f);
    return;
  }
  if (buf.batch != 1)
    throw_runtime("parameter buffer " + buf.name + " has batch " + std::to_string(buf.batch) + " (expected 1)");
  const float scale = 0.02f * std::sqrt(3.0f);  // U(-a, a) has std a / sqrt(3)
  const uint64_t kind = uint64_t(buf.param);
  const uint64_t layer = uint64_t(int64_t(buf.layer) + 1);
  for (int64_t r = 0; r < buf.seq; ++r) {
    for (int64_t c = 0; c < buf.cols; ++c) {
      const ParamCoord full = shard_of(s.model, buf, rank, r, c);
      // Padding of the last vocabulary shard stays zero: never looked up, its logits never counted.
      out[r * buf.cols + c] = vocab_padding(s.model, buf, full)
                                  ? 0.0f
                                  : scale * symmetric_unit(hash_of(seed, kind, layer, uint64_t(full.row), uint64_t(full.col)));
    }
  }
}

void init_data(const Schedule& s, const BufferDesc& buf, DataUse use, uint64_t seed, float* out) {
  const int64_t vocab = s.model.vocab;
  for (int64_t b = 0; b < buf.batch; ++b) {
    // Token 0 of each sequence is random; the rest follow the recurrence. Targets are shifted by one.
    int64_t token = int64_t(hash_of(seed, 0x746f6b656e73ull, uint64_t(b), 0, 0) % uint64_t(vocab));
    for (int64_t q = 0; q < buf.seq; ++q) {
      const int64_t value = use == DataUse::Targets ? next_token(token, vocab) : token;
      for (int64_t c = 0; c < buf.cols; ++c) out[(b * buf.seq + q) * buf.cols + c] = float(value);
      token = next_token(token, vocab);
    }
  }
}

}  // namespace

int64_t next_token(int64_t token, int64_t vocab) { return (token * 7 + 3) % vocab; }

DataUse data_use(const Schedule& schedule, int32_t buffer) {
  for (const Op& op : schedule.ops) {
    if ((op.code == OpCode::EmbeddingFwd || op.code == OpCode::EmbeddingBwd) && op.n_in > 0 &&
        op.in[0].buffer == buffer)
      return DataUse::Tokens;
    if (op.code == OpCode::CrossEntropy && op.n_in > 1 && op.in[1].buffer == buffer) return DataUse::Targets;
  }
  return DataUse::None;
}

bool starts_at_zero(const Schedule& schedule, int32_t buffer) {
  const BufferDesc& buf = schedule.buffers.at(buffer);
  if (buf.role == BufferRole::Param) return false;
  return buf.role != BufferRole::Data || data_use(schedule, buffer) == DataUse::None;
}

void initial_values(const Schedule& schedule, int32_t buffer, int rank, uint64_t seed, float* out) {
  const BufferDesc& buf = schedule.buffers.at(buffer);
  if (buf.role == BufferRole::Param) return init_param(schedule, buf, rank, seed, out);
  if (starts_at_zero(schedule, buffer)) {
    std::fill_n(out, buf.elements(), 0.0f);
    return;
  }
  init_data(schedule, buf, data_use(schedule, buffer), seed, out);
}

}  // namespace domino
