// hf_import.cpp: Hugging Face config.json -> ModelSpec: parsing, the sizes every family shares, dtype,
// sequence length, and the final check that every key of the file was either read or is on the list of keys
// that cannot change the schedule (docs/hf-import.md). The per-family structure is in hf_families.cpp.
#include "sim/model/hf_import.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <utility>

#include "sim/base/json_text.hpp"
#include "sim/base/yaml_reader.hpp"
#include "sim/model/hf_import_internal.hpp"
#include "sim/model/model_check.hpp"

namespace domino {

namespace {

using nlohmann::json;
using hf::Reader;
using hf::Spellings;

const Spellings kHiddenKeys = {"hidden_size", "n_embd"};
const Spellings kLayerKeys = {"num_hidden_layers", "n_layer", "num_layers"};
const Spellings kHeadKeys = {"num_attention_heads", "n_head", "num_heads"};
const Spellings kVocabKeys = {"vocab_size"};
const Spellings kFfnKeys = {"intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size"};
const Spellings kPosKeys = {"max_position_embeddings", "n_positions", "n_ctx"};

// Keys that cannot change the schedule or its cost: training-only regularization, token ids, numerical
// constants of pointwise operations, inference caches, bookkeeping. docs/hf-import.md gives the reasons.
const std::vector<std::string> kIgnoredKeys = {
    "architectures", "auto_map", "transformers_version", "use_cache", "initializer_range", "init_std",
    "dropout", "layerdrop", "rope_theta", "rope_scaling", "rope_parameters", "rotary_emb_base",
    "original_max_position_embeddings", "tokenizer_class", "task_specific_params", "id2label", "label2id",
    "prefix", "gradient_checkpointing", "scale_attn_weights", "scale_attn_by_inverse_layer_idx",
    "reorder_and_upcast_attn", "attention_softmax_in_fp32", "scale_attention_softmax_in_fp32",
    "attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar", "cache_implementation",
    "clip_qkv", "pretraining_tp", "use_mrope", "rotary", "mlp_type", "norm_type", "sliding_window_size", "attention_layers",
    "summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels", "summary_first_dropout"};
// Suffixes of the same kind: dropout probabilities, token ids, norm epsilons.
const std::vector<std::string> kIgnoredSuffixes = {"_dropout", "_pdrop", "_dropout_prob", "_token_id", "_eps",
                                                   "_epsilon"};

bool ignored(const std::string& key) {
  if (std::find(kIgnoredKeys.begin(), kIgnoredKeys.end(), key) != kIgnoredKeys.end()) return true;
  return std::any_of(kIgnoredSuffixes.begin(), kIgnoredSuffixes.end(), [&](const std::string& s) {
    return key.size() >= s.size() && key.compare(key.size() - s.size(), s.size(), s) == 0;
  });
}

// " (did you mean 'x'?)" for a near spelling of an allowed value, else "".
std::string suggestion(const std::string& value, const std::vector<std::string>& allowed) {
  const std::string near = closest_key(value, allowed);
  return near.empty() ? "" : " (did you mean '" + near + "'?)";
}

// A readable model name: _name_or_path, else the checkpoint folder of ".../config.json", else the file stem.
std::string model_name(const Reader& r, const std::string& path) {
  if (auto n = r.opt_string({"_name_or_path"}); n && !n->empty()) return *n;
  const std::filesystem::path p(path);
  if (p.filename() == "config.json" && p.has_parent_path() && !p.parent_path().filename().empty()) {
    return p.parent_path().filename().string();
  }
  return p.stem().string();
}

// The JSON object of a config.json; BadInput at the syntax error's line and column.
json parse_config(const std::string& text, const std::string& path) {
  JsonParse parsed = parse_json_text(text);
  if (parsed.failure) {
    const JsonFailure& f = *parsed.failure;
    const SourceLoc start{path, 1, 1};
    if (f.kind == JsonFailure::Kind::TooDeep) throw_bad_input(start, f.message + ": not a config.json");
    if (f.kind == JsonFailure::Kind::NumberOutOfRange) throw_bad_input(start, "JSON " + f.message);
    std::string what = f.message;
    // nlohmann repeats the location ("parse error at line 5, column 23: ..."): ours leads the message.
    if (what.rfind("parse error at line", 0) == 0 && what.find(": ") != std::string::npos) {
      what = what.substr(what.find(": ") + 2);
    }
    size_t line = 1, column = 1;
    for (size_t i = 0; i + 1 < f.byte && i < text.size(); ++i) {
      column = text[i] == '\n' ? 1 : column + 1;
      line += text[i] == '\n';
    }
    throw_bad_input(SourceLoc{path, int(line), int(column)}, "JSON syntax error: " + what);
  }
  if (!parsed.value.is_object())
    throw_bad_input(SourceLoc{path, 1, 1}, "a Hugging Face config.json must be a JSON object");
  return std::move(parsed.value);
}

// The model_type; BadInput when it is missing or not one Domino supports (after the architectures Domino
// refuses by name, so that a mixture of experts is never answered with a near spelling of a dense family).
std::string read_model_type(const Reader& r) {
  const auto& supported = hf::supported_types();
  const auto type = r.opt_string({"model_type"});
  if (!type) r.fail_file("missing 'model_type' (supported: " + hf::join(supported) + ")");
  hf::refuse_unmodelled_architecture(r);
  if (std::find(supported.begin(), supported.end(), *type) == supported.end()) {
    r.fail("model_type", "'" + *type + "' is not supported; supported: " + hf::join(supported) +
                             suggestion(*type, supported));
  }
  return *type;
}

void read_shape(const Reader& r, ModelSpec& m) {
  m.hidden = r.get_int(kHiddenKeys);
  m.layers = r.get_int(kLayerKeys);
  m.heads = r.get_int(kHeadKeys);
  m.vocab = r.get_int(kVocabKeys);
}

// FC1's width; non-gated families default to 4 x hidden as GPT-2 (n_inner: null) and Falcon do.
void read_ffn_hidden(const Reader& r, ModelSpec& m) {
  if (auto ffn = r.opt_int(kFfnKeys)) {
    m.ffn_hidden = *ffn;
  } else if (!m.gated()) {
    m.ffn_hidden = int(std::min<int64_t>(4 * int64_t(m.hidden), INT_MAX));  // GPT-2 convention: n_inner null
  } else {
    r.fail_file("missing required key 'intermediate_size'");
  }
}

void read_dtype(const Reader& r, ModelSpec& m) {
  const Spellings dtype_keys = {"torch_dtype", "dtype"};
  m.dtype = DType::BF16;
  if (auto dt = r.opt_string(dtype_keys)) {
    if (*dt == "bfloat16")
      m.dtype = DType::BF16;
    else if (*dt == "float16")
      m.dtype = DType::FP16;
    else if (*dt == "float32")
      m.dtype = DType::FP32;
    else
      r.fail(r.present(dtype_keys), "'" + *dt + "' is not supported; supported: bfloat16, float16, float32" +
                                        suggestion(*dt, {"bfloat16", "float16", "float32"}));
  }
}

// Today's configs allow 32K to 1M positions, reached by long-context extension after pretraining; the
// simulator's attention cost and the trace grow with seq_len squared. 4096, the pretraining length of most of
// these families, keeps a default prediction representative and quick; --seq-len chooses another.
constexpr int kSeqLenCap = 4096;

void read_seq_len(const Reader& r, const std::string& model_type, const ModelOverrides& overrides, ModelSpec& m) {
  auto max_pos = r.opt_int(kPosKeys);
  // Rotary positions reach past the config's length (long-context extension); a learned table has its rows.
  if (overrides.seq_len && max_pos && m.positions == Positions::Learned && *overrides.seq_len > *max_pos) {
    r.fail_file(fmt::format("--seq-len {} is longer than the model's learned position table ({} positions)",
                            *overrides.seq_len, *max_pos));
  }
  if (overrides.seq_len) return;  // apply_overrides sets it
  if (!max_pos && model_type == "falcon") {
    m.seq_len = 2048;  // FalconConfig's default: Falcon's config.json files leave it out
    m.notes.push_back("seq_len 2048: Falcon's default (config.json has no max_position_embeddings); pass "
                      "--seq-len to change");
    return;
  }
  if (!max_pos) r.fail_file("no max_position_embeddings, n_positions or n_ctx: pass --seq-len");
  m.seq_len = std::min(*max_pos, kSeqLenCap);
  if (m.seq_len != *max_pos) {
    m.notes.push_back(fmt::format("seq_len {}: the config allows {}; pass --seq-len to change", m.seq_len,
                                  *max_pos));
  }
}

// A key neither read nor known to be harmless may change the model: refuse it rather than guess.
void refuse_unread_keys(const Reader& r, const std::string& model_type) {
  for (const std::string& key : r.unread_keys()) {
    if (ignored(key)) continue;
    r.fail(key, fmt::format("unknown key for model_type '{}': Domino refuses keys it does not read unless they "
                            "cannot change the model (docs/hf-import.md lists both)",
                            model_type));
  }
}

// A model the checks refuse: blames the command-line override, else the JSON key the value came from (so
// the user knows which line to look at), else the file.
[[noreturn]] void fail_check(const Reader& r, const ModelOverrides& overrides, const ModelViolation& v) {
  const std::string flag = override_flag(v.key, overrides);
  if (!flag.empty()) {
    throw_bad_input(SourceLoc{r.path(), 1, 1}, fmt::format("model '{}' (from the command-line override {}): {}",
                                                           v.key, flag, v.message));
  }
  const std::vector<std::pair<std::string, Spellings>> json_keys = {
      {"hidden", kHiddenKeys}, {"layers", kLayerKeys}, {"heads", kHeadKeys},
      {"kv_heads", {"num_key_value_heads", "num_kv_heads"}}, {"ffn_hidden", kFfnKeys}, {"vocab", kVocabKeys},
      {"seq_len", kPosKeys}, {"head_dim", {"head_dim"}}, {"sliding_window", {"sliding_window", "window_size"}},
      {"rotary_dims", {"rotary_dim", "rotary_pct", "partial_rotary_factor"}}};
  for (const auto& [model_key, spellings] : json_keys) {
    const std::string k = r.present(spellings);
    if (model_key == v.key && !k.empty()) r.fail(k, "model '" + v.key + "': " + v.message);
  }
  throw_bad_input(SourceLoc{r.path(), 1, 1}, "model '" + v.key + "': " + v.message);
}

}  // namespace

bool looks_like_hf_config(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || text[first] != '{') return false;
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  return !(j.contains("family") && !j.contains("model_type"));
}

ModelSpec import_hf_config(const std::string& text, const std::string& path, const ModelOverrides& overrides) {
  const json j = parse_config(text, path);
  const Reader r(j, text, path);
  ModelSpec m;
  m.source = path;
  const std::string model_type = read_model_type(r);
  m.hf_model_type = model_type;
  m.name = model_name(r, path);
  read_shape(r, m);
  hf::apply_family(r, model_type, m);
  read_ffn_hidden(r, m);
  read_dtype(r, m);
  read_seq_len(r, model_type, overrides, m);
  m.micro_batch = 1;
  m.tp = 1;
  m.gpus_per_node = 8;
  refuse_unread_keys(r, model_type);
  apply_overrides(m, overrides);
  if (const auto v = check_model(m)) fail_check(r, overrides, *v);
  return m;
}

}  // namespace domino
