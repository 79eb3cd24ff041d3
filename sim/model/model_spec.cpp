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

#include <algorithm>
#include <cstdint>
#include <string>

#include "sim/base/enum_names.hpp"

namespace domino {

const char* to_string(Family f) { return f == Family::Gpt ? "gpt" : "llama"; }
constexpr std::array<const char*, 4> kActivationNames = {"gelu", "swiglu", "relu", "geglu"};
static_assert(size_t(Activation::Geglu) + 1 == kActivationNames.size());
const char* to_string(Activation a) { return enum_name(a, kActivationNames); }
const char* to_string(NormKind n) { return n == NormKind::LayerNorm ? "layernorm" : "rmsnorm"; }
constexpr std::array<const char*, 3> kDTypeNames = {"bf16", "fp16", "fp32"};
static_assert(size_t(DType::FP32) + 1 == kDTypeNames.size(), "one name per DType, in declaration order");
const char* to_string(DType d) { return enum_name(d, kDTypeNames); }

const char* to_string(Positions p) { return p == Positions::Learned ? "learned" : "rotary"; }
const char* to_string(Residual r) { return r == Residual::Sequential ? "sequential" : "parallel"; }
constexpr std::array<const char*, 3> kNormPlacementNames = {"pre", "post", "sandwich"};
static_assert(size_t(NormPlacement::Sandwich) + 1 == kNormPlacementNames.size());
const char* to_string(NormPlacement n) { return enum_name(n, kNormPlacementNames); }
constexpr std::array<const char*, 3> kQkNormNames = {"none", "head", "full"};
static_assert(size_t(QkNorm::Full) + 1 == kQkNormNames.size());
const char* to_string(QkNorm q) { return enum_name(q, kQkNormNames); }
constexpr std::array<const char*, 3> kWindowLayerNames = {"all", "even", "odd"};
static_assert(size_t(WindowLayers::Odd) + 1 == kWindowLayerNames.size());
const char* to_string(WindowLayers w) { return enum_name(w, kWindowLayerNames); }

int dtype_bytes(DType d) { return d == DType::FP32 ? 4 : 2; }

namespace {

// Parameter counts of one layer, either whole (tp = 1 view) or as held by one rank.
struct LayerCounts {
  int64_t gemm_weights = 0;
  int64_t biases = 0;
  int64_t norms = 0;
  int64_t total() const { return gemm_weights + biases + norms; }
};

// Norms over the hidden width in one layer: one before each block (parallel blocks may share it), one after
// each block's output (post), or both (sandwich).
int hidden_norms_per_layer(const ModelSpec& m) {
  const int pre = m.residual == Residual::Parallel && m.shared_norm ? 1 : 2;
  switch (m.norm_placement) {
    case NormPlacement::Pre: return pre;
    case NormPlacement::Post: return 2;
    case NormPlacement::Sandwich: return pre + 2;
  }
  return pre;
}

LayerCounts layer_counts(const ModelSpec& m, bool per_rank) {
  const int64_t h = m.hidden, d = m.head_dim();
  const int64_t q_heads = per_rank ? m.heads_per_rank() : m.heads;
  const int64_t kv_heads = per_rank ? m.kv_heads_per_rank() : m.kv_heads;
  const int64_t ffn = per_rank ? m.ffn_per_rank() : m.ffn_hidden;
  const int64_t gate = m.gated() ? 2 : 1;  // gated MLPs: gate and up projections
  const int64_t qkv_cols = (q_heads + 2 * kv_heads) * d;
  const int64_t per_norm = m.norm == NormKind::LayerNorm ? 2 : 1;  // gamma (and beta)
  LayerCounts c;
  c.gemm_weights = h * qkv_cols + q_heads * d * h + h * ffn * gate + ffn * h;
  // Column-parallel biases are sharded; the row-parallel biases (projection, FC2) are replicated.
  if (m.qkv_bias) c.biases += qkv_cols;
  if (m.proj_bias) c.biases += h;
  if (m.mlp_bias) c.biases += ffn * gate + h;
  c.norms = int64_t(hidden_norms_per_layer(m)) * h * per_norm;
  // Per-head QK norms share one [head_dim] scale across heads (replicated); full ones span the projection.
  if (m.qk_norm == QkNorm::PerHead) c.norms += 2 * d * per_norm;
  if (m.qk_norm == QkNorm::Full) c.norms += (q_heads + kv_heads) * d * per_norm;
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
  f.embedding_params = int64_t(m.vocab) * h + (m.positions == Positions::Learned ? int64_t(m.seq_len) * h : 0);
  const int64_t head_weight = m.tied_embeddings ? 0 : h * int64_t(m.vocab);  // tied: the embedding's
  f.head_params = norm_params + head_weight;
  f.total_params = m.layers * f.params_per_layer + f.embedding_params + f.head_params;
  const int64_t vocab_shard = m.vocab_per_rank();
  const int64_t positions = f.embedding_params - int64_t(m.vocab) * h;
  f.params_per_rank = m.layers * rank.total() + vocab_shard * h + positions + norm_params +
                      (m.tied_embeddings ? 0 : h * vocab_shard);
  // Attention scores and values: 12 x keys per query x attention width per layer (window layers see at
  // most sliding_window keys).
  double attention = 0;
  for (int l = 0; l < m.layers; ++l) {
    const int keys = m.windowed(l) ? std::min(m.seq_len, m.sliding_window) : m.seq_len;
    attention += 12.0 * double(keys) * double(m.attn_width());
  }
  f.train_flops_per_token = 6.0 * double(m.layers) * double(whole.gemm_weights) + attention +
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

std::string bias_summary(const ModelSpec& m) {
  if (m.qkv_bias == m.proj_bias && m.proj_bias == m.mlp_bias) return m.qkv_bias ? "all linears" : "none";
  std::string s;
  for (const auto& [on, name] : {std::pair{m.qkv_bias, "qkv"}, {m.proj_bias, "proj"}, {m.mlp_bias, "mlp"}}) {
    if (on) s += std::string(s.empty() ? "" : "+") + name;
  }
  return s;
}

// The block structure and every attention feature the schedule reads.
std::string structure_summary(const ModelSpec& m) {
  std::string block = fmt::format("{} residual", to_string(m.residual));
  if (m.residual == Residual::Parallel) block += m.shared_norm ? " (one shared norm)" : " (a norm per block)";
  std::string s = fmt::format("  block: {}, {}-norm; positions {}", block, to_string(m.norm_placement),
                              to_string(m.positions));
  if (m.positions == Positions::Rotary && m.rotated_dims() != m.head_dim())
    s += fmt::format(" ({} of {} dims per head)", m.rotated_dims(), m.head_dim());
  s += fmt::format("; embeddings {}\n", m.tied_embeddings ? "tied to the head" : "untied");
  std::string attn = m.kv_heads == m.heads ? "multi-head" : m.kv_heads == 1 ? "multi-query" : "grouped-query";
  if (m.head_size > 0 && m.attn_width() != m.hidden)
    attn += fmt::format(", decoupled head dim (attention width {} vs hidden {})", m.attn_width(), m.hidden);
  if (m.qk_norm != QkNorm::None) attn += fmt::format(", qk-norm {}", to_string(m.qk_norm));
  if (m.sliding_window > 0) {
    attn += fmt::format(", sliding window {} on {} layers", m.sliding_window, to_string(m.window_layers));
    if (m.sliding_window >= m.seq_len) attn += " (no effect at this seq_len)";
  }
  return s + "  attention: " + attn + "\n";
}

}  // namespace

std::string model_summary(const ModelSpec& m) {
  const ModelFacts f = derive_facts(m);
  const int nodes = (m.tp + m.gpus_per_node - 1) / m.gpus_per_node;
  const double flops_iter = f.train_flops_per_token * double(m.tokens()) / m.tp;
  std::string s;
  // An import's family only chose defaults the config then overrode: its model_type says what it is.
  const std::string kind = m.hf_model_type.empty() ? fmt::format("{} family", to_string(m.family))
                                                   : fmt::format("Hugging Face model_type {}", m.hf_model_type);
  s += fmt::format("model {} ({}) from {}\n", m.name, kind, m.source);
  s += fmt::format("  layers {}, hidden {}, heads {} (kv heads {}, head dim {}), ffn {}\n", m.layers,
                   m.hidden, m.heads, m.kv_heads, m.head_dim(), m.ffn_hidden);
  s += fmt::format("  activation {}, norm {}, biases {}, vocab {}\n", to_string(m.activation),
                   to_string(m.norm), bias_summary(m), m.vocab);
  s += structure_summary(m);
  s += fmt::format("  seq_len {}, micro_batch {} ({} tokens), dtype {}\n", m.seq_len, m.micro_batch,
                   m.tokens(), to_string(m.dtype));
  s += fmt::format("  tensor parallel: tp {} on {} node{} of {} GPUs\n", m.tp, nodes, nodes > 1 ? "s" : "",
                   m.gpus_per_node);
  s += fmt::format("  per rank: {} heads, {} kv heads{}, ffn {}, vocab {}{}\n", m.heads_per_rank(),
                   m.kv_heads_per_rank(), m.kv_heads < m.tp ? " (replicated)" : "", m.ffn_per_rank(),
                   m.vocab_per_rank(),
                   int64_t(m.vocab_per_rank()) * m.tp > m.vocab
                       ? fmt::format(" (padded to {})", int64_t(m.vocab_per_rank()) * m.tp)
                       : std::string());
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
  for (const std::string& note : m.notes) s += "  note: " + note + "\n";
  s += fmt::format("  fingerprint {}\n", model_fingerprint(m));
  return s;
}

namespace {

std::string bias_canon(const ModelSpec& m) {
  if (m.qkv_bias == m.proj_bias && m.proj_bias == m.mlp_bias) return m.qkv_bias ? "1" : "0";
  return fmt::format("q{}p{}m{}", int(m.qkv_bias), int(m.proj_bias), int(m.mlp_bias));
}

// Structural fields, each only when it differs from what the model files of its family meant before they
// existed: the fingerprints of plans written for those models stay valid.
std::string structure_canon(const ModelSpec& m) {
  const Positions family_positions = m.family == Family::Llama ? Positions::Rotary : Positions::Learned;
  std::string s;
  if (m.head_size > 0 && m.head_size * m.heads != m.hidden) s += fmt::format("|head_dim={}", m.head_size);
  if (m.positions != family_positions) s += fmt::format("|positions={}", to_string(m.positions));
  if (m.positions == Positions::Rotary && m.rotated_dims() != m.head_dim())
    s += fmt::format("|rotary_dims={}", m.rotary_dims);
  if (m.residual != Residual::Sequential)
    s += fmt::format("|residual={}|shared_norm={}", to_string(m.residual), int(m.shared_norm));
  if (m.norm_placement != NormPlacement::Pre) s += fmt::format("|norm_placement={}", to_string(m.norm_placement));
  if (m.qk_norm != QkNorm::None) s += fmt::format("|qk_norm={}", to_string(m.qk_norm));
  if (m.tied_embeddings) s += "|tied_embeddings=1";
  if (m.vocab_divisible_by != 1) s += fmt::format("|vocab_divisible_by={}", m.vocab_divisible_by);
  if (m.sliding_window > 0)
    s += fmt::format("|sliding_window={}|window_layers={}", m.sliding_window, to_string(m.window_layers));
  return s;
}

}  // namespace

std::string model_fingerprint(const ModelSpec& m) {
  // Every field that changes the schedule or its timing, in a fixed order; never the name or source.
  const std::string canon = fmt::format(
      "model-v1|family={}|layers={}|hidden={}|heads={}|kv_heads={}|ffn_hidden={}|activation={}|norm={}|"
      "bias={}|vocab={}|seq_len={}|micro_batch={}|dtype={}|tp={}|gpus_per_node={}",
      to_string(m.family), m.layers, m.hidden, m.heads, m.kv_heads, m.ffn_hidden, to_string(m.activation),
      to_string(m.norm), bias_canon(m), m.vocab, m.seq_len, m.micro_batch, to_string(m.dtype), m.tp,
      m.gpus_per_node) + structure_canon(m);
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
  m.set_biases(true);
  m.positions = Positions::Learned;
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
