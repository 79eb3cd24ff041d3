// hf_families.cpp: what each Hugging Face model_type means for the schedule. One table row per family holds
// the facts its transformers config class and modeling code fix (norm, gated MLP, positions, the
// tie_word_embeddings and head_dim defaults); one function per family reads the keys that change the rest
// (biases, residual layout, norm placement, QK-norm, partial rotary, KV heads, sliding window).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sim/base/yaml_reader.hpp"
#include "sim/model/hf_import_internal.hpp"

namespace domino::hf {

namespace {

const std::vector<std::string> kGeluNames = {"gelu",        "gelu_new",   "gelu_fast", "gelu_pytorch_tanh",
                                             "gelu_python", "quick_gelu", "gelu_accurate"};

void attention_bias(const Reader& r, ModelSpec& m, bool fallback) {
  m.qkv_bias = m.proj_bias = r.opt_bool("attention_bias").value_or(fallback);
}

// The config's sliding window: `absent` (the family's default) when the key is missing, 0 (none) when null.
int sliding_window_or(const Reader& r, int absent) {
  return r.has("sliding_window") ? r.opt_int({"sliding_window"}).value_or(0) : absent;
}

// A window on every layer.
void all_layer_window(const Reader& r, ModelSpec& m, int absent) {
  m.sliding_window = sliding_window_or(r, absent);
}

// A layer count check_model accepts: per-layer lists are only built for those (it names the others).
bool plausible_layers(const ModelSpec& m) { return m.layers > 0 && m.layers <= (1 << 14); }

// Qwen2/Qwen3: with use_sliding_window, the layers from max_window_layers on use the window
// (transformers' layer_types: sliding for i >= max_window_layers); a layer_types list overrides.
void qwen_window(const Reader& r, ModelSpec& m) {
  const int window = sliding_window_or(r, 4096);  // Qwen2Config's default
  if (window < 0) r.fail("sliding_window", fmt::format("{}: must be 0 (none) or a positive window", window));
  const bool use = r.opt_bool("use_sliding_window").value_or(false);
  const int from = r.opt_int({"max_window_layers"}).value_or(28);
  if (read_layer_types(r, use ? window : 0, m) || !use || !plausible_layers(m)) return;
  std::vector<bool> windowed(size_t(std::max(m.layers, 0)));
  for (int l = 0; l < m.layers; ++l) windowed[size_t(l)] = l >= from;
  set_window_layers(r, windowed, window, "use_sliding_window, max_window_layers", m);
}

void llama(const Reader& r, ModelSpec& m) {
  attention_bias(r, m, false);
  m.mlp_bias = r.opt_bool("mlp_bias").value_or(false);
}

void mistral(const Reader& r, ModelSpec& m) {
  m.set_biases(false);
  all_layer_window(r, m, 4096);  // MistralConfig's default
}

void qwen2(const Reader& r, ModelSpec& m) {
  m.qkv_bias = true;  // Qwen2's q/k/v projections always carry a bias; o_proj and the MLP never
  m.proj_bias = m.mlp_bias = false;
  qwen_window(r, m);
}

void qwen3(const Reader& r, ModelSpec& m) {
  attention_bias(r, m, false);
  m.mlp_bias = false;
  m.qk_norm = QkNorm::PerHead;  // q_norm and k_norm: RMSNorm over head_dim
  qwen_window(r, m);
}

void gemma(const Reader& r, ModelSpec& m) {
  attention_bias(r, m, false);
  m.mlp_bias = false;
}

void gemma2(const Reader& r, ModelSpec& m) {
  gemma(r, m);
  m.norm_placement = NormPlacement::Sandwich;  // pre and post norms around attention and MLP
  const int window = sliding_window_or(r, 4096);  // Gemma2Config's default
  if (read_layer_types(r, window, m) || window == 0) return;
  m.sliding_window = window;
  m.window_layers = WindowLayers::Even;  // Gemma2Attention: sliding_window if not layer_idx % 2
}

// Whether head_dim() is meaningful yet (heads positive and dividing hidden, or a head_dim given).
bool whole_heads(const ModelSpec& m) { return m.heads > 0 && (m.head_size > 0 || m.hidden % m.heads == 0); }

// Rotary over a fraction of each head; the product must be a whole number of dims.
void partial_rotary(const Reader& r, ModelSpec& m, const std::string& key, double fraction) {
  if (!whole_heads(m)) return;  // check_model names the heads that do not divide hidden
  const double dims = fraction * m.head_dim();
  if (fraction <= 0 || fraction > 1 || std::abs(dims - std::round(dims)) > 1e-9) {
    r.fail(key, fmt::format("{} of the head dimension {} is not a whole number of dims in (0, {}]", fraction,
                            m.head_dim(), m.head_dim()));
  }
  m.rotary_dims = int(std::round(dims)) == m.head_dim() ? 0 : int(std::round(dims));
}

void phi3(const Reader& r, ModelSpec& m) {
  m.set_biases(false);
  if (auto f = r.opt_number("partial_rotary_factor")) partial_rotary(r, m, "partial_rotary_factor", *f);
  all_layer_window(r, m, 0);
}

void starcoder2(const Reader& r, ModelSpec& m) {
  m.set_biases(r.opt_bool("use_bias").value_or(true));
  all_layer_window(r, m, 0);
}

void olmo2(const Reader& r, ModelSpec& m) {
  attention_bias(r, m, false);
  m.mlp_bias = false;
  m.norm_placement = NormPlacement::Post;  // norms on each block's output, before the residual add
  m.qk_norm = QkNorm::Full;                // q_norm and k_norm over the whole projection
}

void falcon(const Reader& r, ModelSpec& m) {
  if (r.opt_bool("alibi").value_or(false))
    r.fail("alibi", "ALiBi position biases are not modelled (Domino models rotary and learned positions)");
  if (r.opt_bool("apply_residual_connection_post_layernorm").value_or(false))
    r.fail("apply_residual_connection_post_layernorm",
           "a residual taken after the norm is not modelled (Domino adds the block's input)");
  m.set_biases(r.opt_bool("bias").value_or(false));
  const bool new_arch = r.opt_bool("new_decoder_architecture").value_or(false);
  const bool multi_query = r.opt_bool("multi_query").value_or(true);
  m.kv_heads = new_arch ? r.opt_int({"num_kv_heads"}).value_or(m.heads) : multi_query ? 1 : m.heads;
  if (!new_arch) r.has("num_kv_heads");  // read but unused by transformers without the new architecture
  // Parallel blocks share one input_layernorm unless there are two (ln_attn, ln_mlp): the new architecture's
  // default, or num_ln_in_parallel_attn: 2. Sequential blocks have their two norms whatever it says.
  const int norms = r.opt_int({"num_ln_in_parallel_attn"}).value_or(new_arch ? 2 : 1);
  if (r.opt_bool("parallel_attn").value_or(true)) {
    m.residual = Residual::Parallel;
    m.shared_norm = norms != 2;
  }
}

void gpt2(const Reader& r, ModelSpec& m) {
  m.set_biases(true);
  if (r.opt_bool("add_cross_attention").value_or(false))
    r.fail("add_cross_attention", "cross-attention to an encoder is not modelled (decoder-only models)");
}

// GPT-Neo: global and local (windowed) layers from attention_types, e.g. [[["global", "local"], 12]].
void gpt_neo(const Reader& r, ModelSpec& m) {
  m.qkv_bias = false;  // q/k/v without bias, out_proj and the MLP with
  m.proj_bias = m.mlp_bias = true;
  const int window = r.opt_int({"window_size"}).value_or(256);
  std::vector<bool> windowed;
  const nlohmann::json* types = r.value("attention_types");
  const auto bad = [&] { r.fail("attention_types", "expected [[[\"global\" | \"local\", ...], repeats], ...]"); };
  if (!plausible_layers(m)) return;
  if (!types) {
    for (int l = 0; l < m.layers; ++l) windowed.push_back(l % 2 == 1);  // GPTNeoConfig's default pattern
  } else {
    if (!types->is_array()) bad();
    for (const auto& group : *types) {
      if (!group.is_array() || group.size() != 2 || !group[0].is_array() || !group[1].is_number_integer()) bad();
      const int64_t repeats = group[1].get<int64_t>();
      if (repeats < 0 || repeats * int64_t(group[0].size()) + int64_t(windowed.size()) > 1 << 16) bad();
      for (int64_t i = 0; i < repeats; ++i) {
        for (const auto& kind : group[0]) {
          if (kind != "global" && kind != "local") bad();
          windowed.push_back(kind == "local");
        }
      }
    }
  }
  if (int(windowed.size()) != m.layers) {
    r.fail("attention_types", fmt::format("describes {} layers, the model has {}", windowed.size(), m.layers));
  }
  set_window_layers(r, windowed, window, "attention_types, window_size", m);
}

void gptj(const Reader& r, ModelSpec& m) {
  m.qkv_bias = m.proj_bias = false;  // q/k/v and out_proj without bias, fc_in and fc_out with
  m.mlp_bias = true;
  m.residual = Residual::Parallel;   // x + attn(ln_1(x)) + mlp(ln_1(x))
  m.shared_norm = true;
  const int dims = r.has("rotary_dim") ? r.opt_int({"rotary_dim"}).value_or(0) : 64;  // null: whole head
  if (!whole_heads(m)) return;
  if (dims < 0 || dims > m.head_dim())
    r.fail("rotary_dim", fmt::format("{} is not within the head dimension {}", dims, m.head_dim()));
  m.rotary_dims = dims == m.head_dim() ? 0 : dims;
}

void gpt_neox(const Reader& r, ModelSpec& m) {
  attention_bias(r, m, true);  // query_key_value and dense; the MLP always has biases
  m.mlp_bias = true;
  partial_rotary(r, m, "rotary_pct", r.opt_number("rotary_pct").value_or(0.25));
  if (r.opt_bool("use_parallel_residual").value_or(true)) {
    m.residual = Residual::Parallel;  // input_layernorm and post_attention_layernorm: two norms
    m.shared_norm = false;
  }
}

void opt(const Reader& r, ModelSpec& m) {
  m.set_biases(r.opt_bool("enable_bias").value_or(true));
  if (!r.opt_bool("do_layer_norm_before").value_or(true))
    r.fail("do_layer_norm_before", "OPT's post-norm (a norm after each residual add) is not modelled");
  if (!r.opt_bool("layer_norm_elementwise_affine").value_or(true))
    r.fail("layer_norm_elementwise_affine", "a LayerNorm without gamma and beta is not modelled");
  if (r.opt_bool("_remove_final_layer_norm").value_or(false))
    r.fail("_remove_final_layer_norm", "a model without its final norm is not modelled");
  if (auto proj = r.opt_int({"word_embed_proj_dim"}); proj && *proj != m.hidden)
    r.fail("word_embed_proj_dim", fmt::format("{} differs from hidden_size {}: the projections in and out of "
                                              "the embedding width are not modelled",
                                              *proj, m.hidden));
}

struct Rule {
  const char* type;
  Family family;
  NormKind norm;
  bool gated;
  Positions positions;
  bool tied;         // tie_word_embeddings when absent: the transformers config class's default
  int head_dim;      // -1: no head_dim key (hidden / heads); 0: head_dim key, default hidden / heads; else default
  bool gqa;          // reads num_key_value_heads
  Spellings act_keys;
  const char* act;   // activation when no key gives one
  void (*specifics)(const Reader&, ModelSpec&);
};

const Rule kRules[] = {
    {"llama", Family::Llama, NormKind::RmsNorm, true, Positions::Rotary, false, 0, true, {"hidden_act"}, "silu", llama},
    {"mistral", Family::Llama, NormKind::RmsNorm, true, Positions::Rotary, false, 0, true, {"hidden_act"}, "silu",
     mistral},
    {"qwen2", Family::Llama, NormKind::RmsNorm, true, Positions::Rotary, false, -1, true, {"hidden_act"}, "silu",
     qwen2},
    {"qwen3", Family::Llama, NormKind::RmsNorm, true, Positions::Rotary, false, 128, true, {"hidden_act"}, "silu",
     qwen3},
    {"gemma", Family::Llama, NormKind::RmsNorm, true, Positions::Rotary, true, 256, true,
     {"hidden_activation", "hidden_act"}, "gelu_pytorch_tanh", gemma},
    {"gemma2", Family::Llama, NormKind::RmsNorm, true, Positions::Rotary, true, 256, true,
     {"hidden_activation", "hidden_act"}, "gelu_pytorch_tanh", gemma2},
    {"phi3", Family::Llama, NormKind::RmsNorm, true, Positions::Rotary, false, -1, true, {"hidden_act"}, "silu",
     phi3},
    {"starcoder2", Family::Gpt, NormKind::LayerNorm, false, Positions::Rotary, true, -1, true,
     {"hidden_act", "activation_function"}, "gelu_pytorch_tanh", starcoder2},
    {"olmo2", Family::Llama, NormKind::RmsNorm, true, Positions::Rotary, false, -1, true, {"hidden_act"}, "silu",
     olmo2},
    {"falcon", Family::Gpt, NormKind::LayerNorm, false, Positions::Rotary, true, -1, false, {"activation"}, "gelu",
     falcon},
    {"gpt2", Family::Gpt, NormKind::LayerNorm, false, Positions::Learned, true, -1, false, {"activation_function"},
     "gelu_new", gpt2},
    {"gpt_neox", Family::Gpt, NormKind::LayerNorm, false, Positions::Rotary, false, -1, false, {"hidden_act"},
     "gelu", gpt_neox},
    {"gptj", Family::Gpt, NormKind::LayerNorm, false, Positions::Rotary, false, -1, false, {"activation_function"},
     "gelu_new", gptj},
    {"gpt_neo", Family::Gpt, NormKind::LayerNorm, false, Positions::Learned, true, -1, false,
     {"activation_function"}, "gelu_new", gpt_neo},
    {"opt", Family::Gpt, NormKind::LayerNorm, false, Positions::Learned, true, -1, false, {"activation_function"},
     "relu", opt},
};

// Gated MLPs (gate and up projections) multiply by silu (SwiGLU) or a GeLU (GeGLU); plain MLPs apply a GeLU
// or a ReLU. Anything else would be timed and computed as the wrong function: refused.
Activation read_activation(const Reader& r, const Rule& rule) {
  const std::string key = r.present(rule.act_keys);
  const std::string act = r.opt_string(rule.act_keys).value_or(rule.act);
  const bool gelu = std::find(kGeluNames.begin(), kGeluNames.end(), act) != kGeluNames.end();
  if (rule.gated && (act == "silu" || act == "swish")) return Activation::Swiglu;
  if (gelu) return rule.gated ? Activation::Geglu : Activation::Gelu;
  if (!rule.gated && act == "relu") return Activation::Relu;
  std::vector<std::string> names = kGeluNames;
  names.insert(names.begin(), rule.gated ? "swish" : "relu");
  if (rule.gated) names.insert(names.begin(), "silu");
  const std::string near = closest_key(act, names);
  r.fail(key, fmt::format("activation '{}' is not supported for model_type '{}' ({} MLP); supported: {}{}", act,
                          rule.type, rule.gated ? "gated" : "plain", join(names),
                          near.empty() ? "" : " (did you mean '" + near + "'?)"));
}

void read_head_dim(const Reader& r, const Rule& rule, ModelSpec& m) {
  if (rule.head_dim < 0) return;
  const std::optional<int> given = r.opt_int({"head_dim"});
  if (given && *given <= 0) r.fail("head_dim", fmt::format("must be positive, got {}", *given));
  const int dim = given.value_or(rule.head_dim);
  m.head_size = dim > 0 && int64_t(dim) * m.heads != m.hidden ? dim : 0;  // 0: hidden / heads
}

}  // namespace

const std::vector<std::string>& supported_types() {
  static const std::vector<std::string> types = [] {
    std::vector<std::string> t;
    for (const Rule& rule : kRules) t.push_back(rule.type);
    return t;
  }();
  return types;
}

void apply_family(const Reader& r, const std::string& model_type, ModelSpec& m) {
  const Rule* rule = nullptr;
  for (const Rule& candidate : kRules) {
    if (model_type == candidate.type) rule = &candidate;
  }
  if (rule == nullptr) r.fail("model_type", "'" + model_type + "' is not supported");
  m.family = rule->family;
  m.norm = rule->norm;
  m.activation = read_activation(r, *rule);
  m.positions = rule->positions;
  read_head_dim(r, *rule, m);
  m.kv_heads = rule->gqa ? r.opt_int({"num_key_value_heads"}).value_or(m.heads) : m.heads;
  m.tied_embeddings = r.opt_bool("tie_word_embeddings").value_or(rule->tied);
  rule->specifics(r, m);
}

}  // namespace domino::hf
