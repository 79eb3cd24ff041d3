// model_loader.cpp: load_model, the one entry point for model inputs: resolves a bare name to
// configs/models/NAME.yaml, reads the strict YAML format (or hands JSON to the Hugging Face importer),
// applies the command-line overrides, and validates with locations.
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/base/error.hpp"
#include "sim/base/shipped_files.hpp"
#include "sim/base/yaml_reader.hpp"
#include "sim/model/hf_import.hpp"
#include "sim/model/model_check.hpp"
#include "sim/model/model_spec.hpp"

namespace domino {

namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kModelKeys = {
    "name", "family", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "activation", "norm", "bias",
    "vocab", "seq_len", "micro_batch", "dtype", "tp", "gpus_per_node",
    // Structure beyond the family's defaults (docs/model-format.md).
    "head_dim", "qkv_bias", "proj_bias", "mlp_bias", "positions", "rotary_dims", "residual", "shared_norm",
    "norm_placement", "qk_norm", "tied_embeddings", "sliding_window", "window_layers", "vocab_divisible_by"};

std::string resolve_model_path(const std::string& path_or_name) {
  static const ShippedFolder kModels{"model", "configs/models", {".yaml", ".yml", ".json"}, true};
  return resolve_shipped(path_or_name, kModels);
}

std::string read_text(std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    // A Hugging Face checkpoint folder: its config.json describes the model.
    const fs::path config = fs::path(path) / "config.json";
    if (!fs::is_regular_file(config, ec)) throw_bad_input(path + ": is a directory without a config.json");
    path = config.string();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_bad_input(path + ": cannot open model file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The value of `name` among an enum's names (to_string of each value 0..N-1).
template <typename Enum>
Enum enum_of(const std::string& name) {
  for (int i = 0;; ++i) {
    if (name == to_string(Enum(i))) return Enum(i);
  }
}

template <typename Enum>
std::optional<Enum> opt_enum_of(YamlMap& map, const std::string& key, std::vector<std::string> names) {
  const auto v = map.opt_enum(key, names);
  if (!v) return std::nullopt;
  return enum_of<Enum>(*v);
}

// The structural keys; each defaults to what the family implies.
void read_structure(YamlMap& map, ModelSpec& m) {
  if (map.has("head_dim")) m.head_size = checked_int(map, "head_dim", map.get_int("head_dim"));
  m.qkv_bias = map.opt_bool("qkv_bias").value_or(m.qkv_bias);
  m.proj_bias = map.opt_bool("proj_bias").value_or(m.proj_bias);
  m.mlp_bias = map.opt_bool("mlp_bias").value_or(m.mlp_bias);
  m.positions = opt_enum_of<Positions>(map, "positions", {"learned", "rotary"})
                    .value_or(m.family == Family::Llama ? Positions::Rotary : Positions::Learned);
  if (map.has("rotary_dims")) m.rotary_dims = checked_int(map, "rotary_dims", map.get_int("rotary_dims"));
  m.residual = opt_enum_of<Residual>(map, "residual", {"sequential", "parallel"}).value_or(Residual::Sequential);
  m.shared_norm = map.opt_bool("shared_norm").value_or(false);
  m.norm_placement =
      opt_enum_of<NormPlacement>(map, "norm_placement", {"pre", "post", "sandwich"}).value_or(NormPlacement::Pre);
  m.qk_norm = opt_enum_of<QkNorm>(map, "qk_norm", {"none", "head", "full"}).value_or(QkNorm::None);
  m.tied_embeddings = map.opt_bool("tied_embeddings").value_or(false);
  if (map.has("sliding_window"))
    m.sliding_window = checked_int(map, "sliding_window", map.get_int("sliding_window"));
  m.window_layers = opt_enum_of<WindowLayers>(map, "window_layers", {"all", "even", "odd"}).value_or(WindowLayers::All);
}

ModelSpec parse_yaml_model(const YAML::Node& root, const std::string& file) {
  YamlMap map(root, file, "model");
  for (const auto& k : kModelKeys) map.allow(k);
  map.finish();  // unknown or misspelled keys first: "hiden" should not read as "missing 'hidden'"

  ModelSpec m;
  m.source = file;
  m.name = map.opt_string("name").value_or(fs::path(file).stem().string());
  m.family = map.get_enum("family", {"gpt", "llama"}) == "gpt" ? Family::Gpt : Family::Llama;
  const bool gpt = m.family == Family::Gpt;
  m.layers = checked_int(map, "layers", map.get_int("layers"));
  m.hidden = checked_int(map, "hidden", map.get_int("hidden"));
  m.heads = checked_int(map, "heads", map.get_int("heads"));
  m.kv_heads = map.has("kv_heads") ? checked_int(map, "kv_heads", map.get_int("kv_heads")) : m.heads;
  if (map.has("ffn_hidden")) {
    m.ffn_hidden = checked_int(map, "ffn_hidden", map.get_int("ffn_hidden"));
  } else if (gpt) {
    m.ffn_hidden = int(std::min<int64_t>(4 * int64_t(m.hidden), INT_MAX));
  } else {
    throw_bad_input(map.where(),
                    "model: missing required key 'ffn_hidden' (the llama family has no default)");
  }
  const auto act = map.opt_enum("activation", {"gelu", "swiglu", "relu", "geglu"});
  m.activation = act ? enum_of<Activation>(*act) : (gpt ? Activation::Gelu : Activation::Swiglu);
  const auto norm = map.opt_enum("norm", {"layernorm", "rmsnorm"});
  m.norm = norm ? (*norm == "layernorm" ? NormKind::LayerNorm : NormKind::RmsNorm)
                : (gpt ? NormKind::LayerNorm : NormKind::RmsNorm);
  m.set_biases(map.opt_bool("bias").value_or(gpt));
  read_structure(map, m);
  m.vocab = checked_int(map, "vocab", map.get_int("vocab"));
  if (map.has("vocab_divisible_by"))
    m.vocab_divisible_by = checked_int(map, "vocab_divisible_by", map.get_int("vocab_divisible_by"));
  m.seq_len = checked_int(map, "seq_len", map.get_int("seq_len"));
  m.micro_batch = checked_int(map, "micro_batch", map.get_int("micro_batch"));
  const std::string dtype = map.get_enum("dtype", {"bf16", "fp16", "fp32"});
  m.dtype = dtype == "bf16" ? DType::BF16 : dtype == "fp16" ? DType::FP16 : DType::FP32;
  if (map.has("tp")) m.tp = checked_int(map, "tp", map.get_int("tp"));
  if (map.has("gpus_per_node"))
    m.gpus_per_node = checked_int(map, "gpus_per_node", map.get_int("gpus_per_node"));
  return m;
}

ModelSpec load_yaml_model(const std::string& text, const std::string& file, const ModelOverrides& overrides) {
  const YAML::Node root = load_yaml_string(text, file);
  if (root.IsNull() || !root.IsDefined()) throw_bad_input(SourceLoc{file, 1, 1}, "model file is empty");
  try {
    ModelSpec m = parse_yaml_model(root, file);
    apply_overrides(m, overrides);
    if (const auto v = check_model(m)) {
      const YamlMap map(root, file, "model");
      const std::string flag = override_flag(v->key, overrides);
      if (!flag.empty()) {
        throw_bad_input(map.where(), fmt::format("model '{}' (from the command-line override {}): {}", v->key,
                                                 flag, v->message));
      }
      map.fail(v->key, v->message + (map.has(v->key) ? "" : " (value not in the file: the default)"));
    }
    return m;
  } catch (const YAML::Exception& e) {
    // Safety net: yaml-cpp conversions we did not foresee still become located input errors.
    throw_bad_input(SourceLoc{file, e.mark.line + 1, e.mark.column + 1}, "model: " + e.msg);
  }
}

}  // namespace

ModelSpec load_model(const std::string& path_or_name, const ModelOverrides& overrides) {
  std::string path = resolve_model_path(path_or_name);
  return load_model_string(read_text(path), path, overrides);
}

ModelSpec load_model_string(const std::string& text, const std::string& path, const ModelOverrides& overrides) {
  // JSON is also YAML: a .json file that is a Domino model in JSON syntax (a "family" key, no "model_type")
  // is read as YAML; any other .json, or a JSON object in a file of another name, is a Hugging Face config.
  if (looks_like_hf_config(text) ||
      (path.ends_with(".json") && text.find("\"family\"") == std::string::npos)) {
    return import_hf_config(text, path, overrides);
  }
  return load_yaml_model(text, path, overrides);
}

}  // namespace domino
