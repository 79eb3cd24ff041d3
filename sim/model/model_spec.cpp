// model_spec.cpp: names of the model enums, the derived facts (parameters, FLOPs, AllReduce bytes), the
// human-readable summary, the fingerprint plans record, and the embedded default model.
//
// Conventions (docs/model-format.md repeats them):
// - Parameters are Megatron-style: QKV, output projection, FC1 (doubled for SwiGLU), FC2, their biases when
//   `bias`, two norms per layer; token embedding (+ learned positions of seq_len rows for the gpt family);
//   an untied output head with its final norm. Per rank, the layers, the token embedding and the head are
//   sharded by tp (the last two over the vocabulary, Megatron's vocab-parallel layers: vocab_per_rank rows
//   or columns each); the positional embedding and the final norm are replicated.
// - Training FLOPs per token = 6 x GEMM weights (forward 2, backward 4) + 12 x layers x seq_len x hidden for
//   attention scores and values (causal masking NOT halved: the kernels we time compute the full square)
//   + 6 x hidden x vocab for the head.
#include "sim/model/model_spec.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "sim/base/enum_names.hpp"

namespace domino {

const char* to_string(Family f) { return f == Family::Gpt ? "gpt" : "llama"; }
const char* to_string(Activation a) { return a == Activation::Gelu ? "gelu" : "swiglu"; }
const char* to_string(NormKind n) { return n == NormKind::LayerNorm ? "layernorm" : "rmsnorm"; }
constexpr std::array<const char*, 3> kDTypeNames = {"bf16", "fp16", "fp32"};
static_assert(size_t(DType::FP32) + 1 == kDTypeNames.size(), "one name per DType, in declaration order");
const char* to_string(DType d) { return enum_name(d, kDTypeNames); }

int dtype_bytes(DType d) { return d == DType::FP32 ? 4 : 2; }

namespace {

// Parameter counts of one layer, either whole (tp = 1 view) or as held by one rank.
struct LayerCounts {
  int64_t gemm_weights = 0;
  int64_t biases = 0;
  int64_t norms = 0;
  int64_t total() const { return gemm_weights + biases + norms; }
};

LayerCounts layer_counts(const ModelSpec& m, bool per_rank) {
  const int64_t h = m.hidden, d = m.head_dim();
  const int64_t q_heads = per_rank ? m.heads_per_rank() : m.heads;
  const int64_t kv_heads = per_rank ? m.kv_heads_per_rank() : m.kv_heads;
  const int64_t ffn = per_rank ? m.ffn_per_rank() : m.ffn_hidden;
  const int64_t gate = m.activation == Activation::Swiglu ? 2 : 1;  // SwiGLU: gate and up projections
  const int64_t qkv_cols = (q_heads + 2 * kv_heads) * d;
  LayerCounts c;
  c.gemm_weights = h * qkv_cols + q_heads * d * h + h * ffn * gate + ffn * h;
  // Column-parallel biases are sharded; the row-parallel biases (projection, FC2) are replicated.
  if (m.bias) c.biases = qkv_cols + h + ffn * gate + h;
  c.norms = 2 * h * (m.norm == NormKind::LayerNorm ? 2 : 1);
  return c;
}

}  // namespace

ModelFacts derive_facts(const ModelSpec& m) {
  validate_model(m);  // the arithmetic below divides by heads and tp
  const int64_t h = m.hidden;
  const int64_t norm_params = h * (m.norm == NormKind::LayerNorm ? 2 : 1);
  const LayerCounts whole = layer_counts(m, false);
  const LayerCounts rank = layer_counts(m, true);

  ModelFacts f;
  f.params_per_layer = whole.total();
  f.embedding_params = int64_t(m.vocab) * h + (m.family == Family::Gpt ? int64_t(m.seq_len) * h : 0);
  f.head_params = norm_params + h * m.vocab;
  f.total_params = m.layers * f.params_per_layer + f.embedding_params + f.head_params;
  const int64_t vocab_shard = m.vocab_per_rank();
  const int64_t positions = f.embedding_params - int64_t(m.vocab) * h;
  f.params_per_rank = m.layers * rank.total() + vocab_shard * h + positions + norm_params + h * vocab_shard;
  f.train_flops_per_token = 6.0 * double(m.layers) * double(whole.gemm_weights) +
                            12.0 * double(m.layers) * double(m.seq_len) * double(h) +
                            6.0 * double(h) * double(m.vocab);
  f.allreduce_bytes = m.tokens() * h * dtype_bytes(m.dtype);
  f.allreduces_per_layer = 4;
  return f;
}

namespace {

std::string count_str(double v) {
  if (v >= 1e12) return fmt::format("{:.2f} T", v / 1e12);
  if (v >= 1e9) return fmt::format("{:.2f} B", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.2f} M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f} K", v / 1e3);
  return fmt::format("{:.0f}", v);
}

std::string bytes_str(double b) {
  if (b >= double(1 << 30)) return fmt::format("{:.2f} GiB", b / double(1 << 30));
  if (b >= double(1 << 20)) return fmt::format("{:.2f} MiB", b / double(1 << 20));
  if (b >= 1024) return fmt::format("{:.1f} KiB", b / 1024);
  return fmt::format("{:.0f} B", b);
}

}  // namespace

std::string model_summary(const ModelSpec& m) {
  const ModelFacts f = derive_facts(m);
  const int nodes = (m.tp + m.gpus_per_node - 1) / m.gpus_per_node;
  const double flops_iter = f.train_flops_per_token * double(m.tokens()) / m.tp;
  std::string s;
  s += fmt::format("model {} ({} family) from {}\n", m.name, to_string(m.family), m.source);
  s += fmt::format("  layers {}, hidden {}, heads {} (kv heads {}, head dim {}), ffn {}\n", m.layers,
                   m.hidden, m.heads, m.kv_heads, m.head_dim(), m.ffn_hidden);
  s += fmt::format("  activation {}, norm {}, bias {}, vocab {}\n", to_string(m.activation),
                   to_string(m.norm), m.bias ? "yes" : "no", m.vocab);
  s += fmt::format("  seq_len {}, micro_batch {} ({} tokens), dtype {}\n", m.seq_len, m.micro_batch,
                   m.tokens(), to_string(m.dtype));
  s += fmt::format("  tensor parallel: tp {} on {} node{} of {} GPUs\n", m.tp, nodes, nodes > 1 ? "s" : "",
                   m.gpus_per_node);
  s += fmt::format("  per rank: {} heads, {} kv heads{}, ffn {}, vocab {}{}\n", m.heads_per_rank(),
                   m.kv_heads_per_rank(), m.kv_heads < m.tp ? " (replicated)" : "", m.ffn_per_rank(),
                   m.vocab_per_rank(), m.vocab % m.tp != 0 ? " (last shard padded)" : "");
  s += fmt::format("  parameters: {} total ({} per layer, embedding {}, head {}), {} per rank\n",
                   count_str(double(f.total_params)), count_str(double(f.params_per_layer)),
                   count_str(double(f.embedding_params)), count_str(double(f.head_params)),
                   count_str(double(f.params_per_rank)));
  s += fmt::format("  training FLOPs: {}FLOP per token, {}FLOP per rank per iteration\n",
                   count_str(f.train_flops_per_token), count_str(flops_iter));
  // Outside the layers: the embedding's forward and the head's backward AllReduce of that size, and the
  // cross-entropy's two per-token ones (max, then sum of exp and target logit: 3 values per token).
  const double ends = 2.0 * double(f.allreduce_bytes) + 3.0 * double(m.tokens()) * dtype_bytes(m.dtype);
  s += fmt::format("  AllReduce: {} per layer of {} each, 2 more of that size and 2 for the loss ({} per iteration)\n",
                   f.allreduces_per_layer, bytes_str(double(f.allreduce_bytes)),
                   bytes_str(double(f.allreduce_bytes) * f.allreduces_per_layer * m.layers + ends));
  s += fmt::format("  fingerprint {}\n", model_fingerprint(m));
  return s;
}

std::string model_fingerprint(const ModelSpec& m) {
  // Every field that changes the schedule or its timing, in a fixed order; never the name or source.
  const std::string canon = fmt::format(
      "model-v1|family={}|layers={}|hidden={}|heads={}|kv_heads={}|ffn_hidden={}|activation={}|norm={}|"
      "bias={}|vocab={}|seq_len={}|micro_batch={}|dtype={}|tp={}|gpus_per_node={}",
      to_string(m.family), m.layers, m.hidden, m.heads, m.kv_heads, m.ffn_hidden, to_string(m.activation),
      to_string(m.norm), m.bias ? 1 : 0, m.vocab, m.seq_len, m.micro_batch, to_string(m.dtype), m.tp,
      m.gpus_per_node);
  uint64_t hash = 1469598103934665603ull;  // FNV-1a 64: stable across platforms and releases
  for (unsigned char c : canon) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return fmt::format("{:016x}", hash);
}

ModelSpec default_model() {
  // Must equal configs/models/cpu-gpt.yaml (a test compares fingerprints).
  ModelSpec m;
  m.name = "cpu-gpt";
  m.family = Family::Gpt;
  m.layers = 4;
  m.hidden = 384;
  m.heads = 8;
  m.kv_heads = 8;
  m.ffn_hidden = 1536;
  m.activation = Activation::Gelu;
  m.norm = NormKind::LayerNorm;
  m.bias = true;
  m.vocab = 1024;
  m.seq_len = 128;
  m.micro_batch = 8;
  m.dtype = DType::FP32;
  m.tp = 2;
  m.gpus_per_node = 8;
  m.source = "<embedded>";
  return m;
}

}  // namespace domino
