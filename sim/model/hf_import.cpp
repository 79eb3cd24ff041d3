// hf_import.cpp: Hugging Face config.json -> ModelSpec. Unknown JSON keys are ignored (real configs carry
// dozens); keys we read must have the right type. Messages locate the JSON key in the file.
#include "sim/model/hf_import.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "sim/base/error.hpp"
#include "sim/base/json_text.hpp"
#include "sim/model/model_check.hpp"
#include "sim/base/yaml_reader.hpp"

namespace domino {

namespace {

using nlohmann::json;
using Spellings = std::vector<std::string>;

const std::vector<std::string> kLlamaTypes = {"llama", "mistral"};
const std::vector<std::string> kGptTypes = {"gpt2", "gpt_neox", "gptj", "gpt_neo", "opt"};
// Every spelling of the keys real checkpoints use.
const Spellings kHiddenKeys = {"hidden_size", "n_embd"};
const Spellings kLayerKeys = {"num_hidden_layers", "n_layer", "num_layers"};
const Spellings kHeadKeys = {"num_attention_heads", "n_head", "num_heads"};
const Spellings kKvHeadKeys = {"num_key_value_heads"};
const Spellings kVocabKeys = {"vocab_size"};
const Spellings kFfnKeys = {"intermediate_size", "n_inner", "ffn_dim"};
const Spellings kPosKeys = {"max_position_embeddings", "n_positions", "n_ctx"};
const std::vector<std::string> kActivations = {"gelu",        "gelu_new",   "gelu_fast", "gelu_pytorch_tanh",
                                               "gelu_python", "quick_gelu", "relu",      "silu",
                                               "swish"};

// A JSON value for a message: scalars as written (long strings cut), containers by kind. Never dump() a
// container: a hostile file nests arrays deeply enough to exhaust the stack of a recursive printer.
std::string describe(const nlohmann::json& v) {
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  std::string s = v.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

SourceLoc loc_at_byte(const std::string& path, const std::string& text, size_t byte) {
  SourceLoc loc{path, 1, 1};
  for (size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++loc.line;
      loc.column = 1;
    } else {
      ++loc.column;
    }
  }
  return loc;
}

// Reads the keys Domino needs; each accessor takes every spelling real checkpoints use.
class HfReader {
 public:
  HfReader(const json& j, const std::string& text, const std::string& path)
      : j_(j), text_(text), path_(path) {}

  // First spelling present with a non-null value, or "".
  std::string present(const Spellings& keys) const {
    for (const auto& k : keys) {
      if (j_.contains(k) && !j_[k].is_null()) return k;
    }
    return "";
  }

  // Location of "key": in the text (first occurrence used as a key), else the file's start.
  SourceLoc where(const std::string& key) const {
    const std::string quoted = "\"" + key + "\"";
    for (size_t pos = text_.find(quoted); pos != std::string::npos; pos = text_.find(quoted, pos + 1)) {
      size_t after = pos + quoted.size();
      while (after < text_.size() && std::isspace(static_cast<unsigned char>(text_[after]))) ++after;
      if (after < text_.size() && text_[after] == ':') return loc_at_byte(path_, text_, pos);
    }
    return SourceLoc{path_, 1, 1};
  }

  [[noreturn]] void fail(const std::string& key, const std::string& message) const {
    throw_bad_input(where(key), "config.json '" + key + "': " + message);
  }

  std::optional<int> opt_int(const Spellings& keys) const {
    const std::string k = present(keys);
    if (k.empty()) return std::nullopt;
    const json& v = j_[k];
    if (!v.is_number_integer()) fail(k, "expected an integer, got " + describe(v));
    if (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(INT_MAX)
                               : (v.get<int64_t>() > INT_MAX || v.get<int64_t>() < INT_MIN)) {
      fail(k, "value " + describe(v) + " is out of range");
    }
    return static_cast<int>(v.get<int64_t>());
  }

  int get_int(const Spellings& keys) const {
    if (auto v = opt_int(keys)) return *v;
    throw_bad_input(SourceLoc{path_, 1, 1}, "config.json: missing required key '" + keys.front() + "'" +
                                                (keys.size() > 1 ? " (or " + join(keys, 1) + ")" : ""));
  }

  std::optional<std::string> opt_string(const Spellings& keys) const {
    const std::string k = present(keys);
    if (k.empty()) return std::nullopt;
    if (!j_[k].is_string()) fail(k, "expected a string, got " + describe(j_[k]));
    return j_[k].get<std::string>();
  }

  static std::string join(const std::vector<std::string>& v, size_t from = 0) {
    std::string s;
    for (size_t i = from; i < v.size(); ++i) s += (s.empty() ? "" : ", ") + v[i];
    return s;
  }

 private:
  const json& j_;
  const std::string& text_;
  const std::string& path_;
};

std::string one_of(const std::string& value, const std::vector<std::string>& allowed) {
  const std::string near = closest_key(value, allowed);
  return "'" + value + "' is not supported; supported: " + HfReader::join(allowed) +
         (near.empty() ? "" : " (did you mean '" + near + "'?)");
}

// A readable model name: _name_or_path, else the checkpoint folder of ".../config.json", else the file stem.
std::string model_name(const HfReader& r, const std::string& path) {
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
    throw_bad_input(loc_at_byte(path, text, f.byte > 0 ? f.byte - 1 : 0), "JSON syntax error: " + what);
  }
  if (!parsed.value.is_object())
    throw_bad_input(SourceLoc{path, 1, 1}, "a Hugging Face config.json must be a JSON object");
  return std::move(parsed.value);
}

// The family model_type names; BadInput when it is missing or not one Domino supports.
Family read_family(const HfReader& r, const std::string& path) {
  std::vector<std::string> supported = kLlamaTypes;
  supported.insert(supported.end(), kGptTypes.begin(), kGptTypes.end());
  const auto type = r.opt_string({"model_type"});
  if (!type) {
    throw_bad_input(SourceLoc{path, 1, 1},
                    "config.json: missing 'model_type' (supported: " + HfReader::join(supported) + ")");
  }
  if (std::find(supported.begin(), supported.end(), *type) == supported.end()) {
    r.fail("model_type", one_of(*type, supported));
  }
  return std::find(kLlamaTypes.begin(), kLlamaTypes.end(), *type) != kLlamaTypes.end() ? Family::Llama : Family::Gpt;
}

void read_shape(const HfReader& r, ModelSpec& m) {
  m.hidden = r.get_int(kHiddenKeys);
  m.layers = r.get_int(kLayerKeys);
  m.heads = r.get_int(kHeadKeys);
  m.kv_heads = r.opt_int(kKvHeadKeys).value_or(m.heads);
  m.vocab = r.get_int(kVocabKeys);
  if (auto head_dim = r.opt_int({"head_dim"}); head_dim && int64_t(*head_dim) * m.heads != m.hidden) {
    r.fail("head_dim", fmt::format("{} differs from hidden_size / num_attention_heads ({} / {}): decoupled "
                                   "head dimensions are not supported",
                                   *head_dim, m.hidden, m.heads));
  }
}

void read_ffn_hidden(const HfReader& r, const std::string& path, ModelSpec& m) {
  if (auto ffn = r.opt_int(kFfnKeys)) {
    m.ffn_hidden = *ffn;
  } else if (m.family == Family::Gpt) {
    m.ffn_hidden = int(std::min<int64_t>(4 * int64_t(m.hidden), INT_MAX));  // GPT-2 convention: n_inner null
  } else {
    throw_bad_input(SourceLoc{path, 1, 1}, "config.json: missing required key 'intermediate_size'");
  }
}

void read_activation_and_norm(const HfReader& r, ModelSpec& m) {
  // Llama-family MLPs are always gated (gate/up/down projections), whatever the activation function.
  m.activation = m.family == Family::Llama ? Activation::Swiglu : Activation::Gelu;
  const Spellings act_keys = {"hidden_act", "activation_function"};
  if (auto act = r.opt_string(act_keys)) {
    if (std::find(kActivations.begin(), kActivations.end(), *act) == kActivations.end()) {
      r.fail(r.present(act_keys), one_of(*act, kActivations));
    }
  }
  m.norm = (m.family == Family::Llama || r.present({"rms_norm_eps"}) != "") ? NormKind::RmsNorm
                                                                            : NormKind::LayerNorm;
  m.set_biases(m.family == Family::Gpt);
  m.positions = m.family == Family::Llama ? Positions::Rotary : Positions::Learned;
}

void read_dtype(const HfReader& r, ModelSpec& m) {
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
      r.fail(r.present(dtype_keys), one_of(*dt, {"bfloat16", "float16", "float32"}));
  }
}

void read_seq_len(const HfReader& r, const std::string& path, const ModelOverrides& overrides, ModelSpec& m) {
  const auto max_pos = r.opt_int(kPosKeys);
  if (!overrides.seq_len && !max_pos) {
    throw_bad_input(SourceLoc{path, 1, 1},
                    "config.json: no max_position_embeddings, n_positions or n_ctx: pass --seq-len");
  }
  m.seq_len = max_pos ? std::min(*max_pos, 2048) : 0;
}

// A model the checks refuse: blames the command-line override, else the JSON key the value came from (so
// the user knows which line to look at), else the file.
[[noreturn]] void fail_check(const HfReader& r, const std::string& path, const ModelOverrides& overrides,
                             const ModelViolation& v) {
  const std::string flag = override_flag(v.key, overrides);
  if (!flag.empty()) {
    throw_bad_input(SourceLoc{path, 1, 1}, fmt::format("model '{}' (from the command-line override {}): {}",
                                                       v.key, flag, v.message));
  }
  const std::vector<std::pair<std::string, Spellings>> json_keys = {
      {"hidden", kHiddenKeys}, {"layers", kLayerKeys}, {"heads", kHeadKeys}, {"kv_heads", kKvHeadKeys},
      {"ffn_hidden", kFfnKeys}, {"vocab", kVocabKeys}, {"seq_len", kPosKeys}};
  for (const auto& [model_key, spellings] : json_keys) {
    const std::string k = r.present(spellings);
    if (model_key == v.key && !k.empty()) r.fail(k, "model '" + v.key + "': " + v.message);
  }
  throw_bad_input(SourceLoc{path, 1, 1}, "model '" + v.key + "': " + v.message);
}

}  // namespace

bool looks_like_hf_config(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || text[first] != '{') return false;
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  return !(j.contains("family") && !j.contains("model_type"));
}

ModelSpec import_hf_config(const std::string& text, const std::string& path,
                           const ModelOverrides& overrides) {
  const json j = parse_config(text, path);
  const HfReader r(j, text, path);
  ModelSpec m;
  m.source = path;
  m.family = read_family(r, path);
  m.name = model_name(r, path);
  read_shape(r, m);
  read_ffn_hidden(r, path, m);
  read_activation_and_norm(r, m);
  read_dtype(r, m);
  read_seq_len(r, path, overrides, m);
  m.micro_batch = 1;
  m.tp = 1;
  m.gpus_per_node = 8;
  apply_overrides(m, overrides);
  if (const auto v = check_model(m)) fail_check(r, path, overrides, *v);
  return m;
}

}  // namespace domino
