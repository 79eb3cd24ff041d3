// model_check.cpp: every constraint a model must meet (sizes, divisibility by heads and tp), and the
// command-line overrides. One rule list serves validate_model, the YAML loader and the HF importer.
#include "sim/model/model_check.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "sim/base/error.hpp"

namespace domino {

namespace {

// Upper bounds far above any real model; they keep every derived count inside int64 (no overflow, no UB).
struct SizeRule {
  const char* key;
  int ModelSpec::*field;
  int64_t max;
};

constexpr SizeRule kSizeRules[] = {
    {"layers", &ModelSpec::layers, 1 << 14},
    {"hidden", &ModelSpec::hidden, 1 << 20},
    {"heads", &ModelSpec::heads, 1 << 16},
    {"kv_heads", &ModelSpec::kv_heads, 1 << 16},
    {"ffn_hidden", &ModelSpec::ffn_hidden, 1 << 22},
    {"vocab", &ModelSpec::vocab, 1 << 24},
    {"vocab_divisible_by", &ModelSpec::vocab_divisible_by, 1 << 16},
    {"seq_len", &ModelSpec::seq_len, 1 << 22},
    {"micro_batch", &ModelSpec::micro_batch, 1 << 16},
    {"tp", &ModelSpec::tp, 1 << 16},
    {"gpus_per_node", &ModelSpec::gpus_per_node, 1 << 16},
};

ModelViolation bad(std::string key, std::string message) { return {std::move(key), std::move(message)}; }

// The structural fields: each combination the schedule cannot express is named.
std::optional<ModelViolation> check_structure(const ModelSpec& m) {
  if (m.head_size < 0 || m.head_size > (1 << 14))
    return bad("head_dim", fmt::format("must be a positive integer of at most {}, got {}", 1 << 14, m.head_size));
  if (m.rotary_dims < 0 || m.rotary_dims > m.head_dim())
    return bad("rotary_dims", fmt::format("{} is not within the head dimension {}", m.rotary_dims, m.head_dim()));
  if (m.rotary_dims > 0 && m.positions != Positions::Rotary)
    return bad("rotary_dims", "given for a model without rotary positions (positions: rotary)");
  if (m.shared_norm && m.residual != Residual::Parallel)
    return bad("shared_norm", "only parallel blocks (residual: parallel) can share one norm");
  if (m.norm_placement != NormPlacement::Pre && m.residual == Residual::Parallel) {
    return bad("norm_placement",
               fmt::format("{} norms with parallel blocks (residual: parallel) are not modelled "
                           "(no model family has them)",
                           to_string(m.norm_placement)));
  }
  // The post norm reads the reduced output of the row-parallel GEMM; its bias would be added before it.
  if (m.norm_placement != NormPlacement::Pre && (m.proj_bias || m.mlp_bias)) {
    return bad("norm_placement", fmt::format("{} norms with biases on the attention projection or FC2 "
                                             "(proj_bias / mlp_bias) are not modelled: set bias: false",
                                             to_string(m.norm_placement)));
  }
  if (m.sliding_window < 0 || m.sliding_window > (1 << 22))
    return bad("sliding_window", fmt::format("must be 0 (none) or a positive window, got {}", m.sliding_window));
  if (m.window_layers != WindowLayers::All && m.sliding_window == 0)
    return bad("window_layers", "given without a sliding_window");
  // QK-norm is an RMSNorm with gains only; over the whole projection it needs every rank's heads.
  if (m.qk_norm != QkNorm::None && m.norm != NormKind::RmsNorm)
    return bad("qk_norm", "with LayerNorm (norm: layernorm) is not modelled: QK-norm is an RMSNorm without bias");
  if (m.qk_norm == QkNorm::Full && m.tp > 1)
    return bad("qk_norm", fmt::format("full (over all heads, OLMo 2) needs the sum of squares across tensor-parallel "
                                      "ranks, which is not modelled: use tp 1 (got tp {}) or qk_norm: head",
                                      m.tp));
  return std::nullopt;
}

}  // namespace

std::optional<ModelViolation> check_model(const ModelSpec& m) {
  if (m.name.empty()) return bad("name", "must not be empty");
  for (const SizeRule& r : kSizeRules) {
    const int v = m.*r.field;
    if (v <= 0) return bad(r.key, fmt::format("must be a positive integer, got {}", v));
    if (v > r.max) return bad(r.key, fmt::format("{} is implausibly large (at most {})", v, r.max));
  }
  if (const auto v = check_structure(m)) return v;
  if (m.head_size == 0 && m.hidden % m.heads != 0) {
    return bad("heads", fmt::format("heads {} does not divide hidden {} (the head dimension must be whole)",
                                    m.heads, m.hidden));
  }
  if (m.heads % m.kv_heads != 0) {
    return bad("kv_heads", fmt::format("kv_heads {} does not divide heads {} (each KV head serves an equal "
                                       "group of query heads)",
                                       m.kv_heads, m.heads));
  }
  if (m.positions == Positions::Rotary && m.rotated_dims() % 2 != 0) {
    return bad(m.rotary_dims > 0 ? "rotary_dims" : m.head_size > 0 ? "head_dim" : "heads",
               m.rotary_dims > 0 || m.head_size > 0
                   ? fmt::format("the rotary embedding turns pairs of dims: {} rotated dims per head is odd",
                                 m.rotated_dims())
                   : fmt::format("head dimension {} (hidden {} / heads {}) must be even: the rotary "
                                 "embedding turns pairs of dims",
                                 m.head_dim(), m.hidden, m.heads));
  }
  if (m.heads % m.tp != 0) {
    return bad("tp", fmt::format("tp {} does not divide heads {} (each rank holds whole attention heads)",
                                 m.tp, m.heads));
  }
  if (m.kv_heads % m.tp != 0 && m.tp % m.kv_heads != 0) {
    return bad("tp", fmt::format("tp {} does not fit kv_heads {}: KV heads are split when kv_heads is a "
                                 "multiple of tp and replicated (one per rank) when tp is a multiple of "
                                 "kv_heads",
                                 m.tp, m.kv_heads));
  }
  if (m.ffn_hidden % m.tp != 0) {
    return bad("tp", fmt::format("tp {} does not divide ffn_hidden {} (FC1 columns are split evenly across "
                                 "ranks)",
                                 m.tp, m.ffn_hidden));
  }
  if (m.tp > m.gpus_per_node && m.tp % m.gpus_per_node != 0) {
    return bad("tp", fmt::format("tp {} spans nodes of {} GPUs unevenly: use tp <= gpus_per_node or a "
                                 "multiple of it",
                                 m.tp, m.gpus_per_node));
  }
  return std::nullopt;
}

void validate_model(const ModelSpec& m) {
  if (const auto v = check_model(m)) {
    throw_bad_input(SourceLoc{m.source}, "model '" + v->key + "': " + v->message);
  }
  validate_training(m.training);
}

std::string override_flag(const std::string& key, const ModelOverrides& o) {
  if (key == "tp" && o.tp) return fmt::format("--tp {}", *o.tp);
  if (key == "seq_len" && o.seq_len) return fmt::format("--seq-len {}", *o.seq_len);
  if (key == "micro_batch" && o.micro_batch) return fmt::format("--micro-batch {}", *o.micro_batch);
  return "";
}

void apply_overrides(ModelSpec& m, const ModelOverrides& o) {
  if (o.tp) m.tp = *o.tp;
  if (o.seq_len) m.seq_len = *o.seq_len;
  if (o.micro_batch) m.micro_batch = *o.micro_batch;
}

}  // namespace domino
