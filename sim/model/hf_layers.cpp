// hf_layers.cpp: the Hugging Face importer's answers about layers: which layers attend through a sliding
// window (a per-layer list folded into all / even / odd layers), and the architectures refused by name
// because their layers are not the dense decoder layers Domino schedules (mixture-of-experts MLPs, latent
// attention, OLMo 1's norm without parameters).
#include <fmt/format.h>

#include <algorithm>

#include "sim/model/hf_import_internal.hpp"

namespace domino::hf {

namespace {

const std::vector<std::string> kMoeTypes = {"mixtral",    "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3",
                                            "dbrx",       "olmoe",     "jamba",     "granitemoe",  "phimoe",
                                            "jetmoe",     "switch_transformers", "nllb_moe", "gpt_oss", "llama4"};
const std::vector<std::string> kExpertCountKeys = {"num_experts", "num_local_experts", "n_routed_experts"};
const std::vector<std::string> kMlaTypes = {"deepseek_v2", "deepseek_v3"};

const char* kDense = "Domino models dense decoder-only models (one MLP per layer): model_type llama, mistral, "
                     "qwen2, qwen3, gemma, gemma2, phi3, starcoder2, olmo2, falcon, gpt2, gpt_neox, gptj, "
                     "gpt_neo, opt";

}  // namespace

void set_window_layers(const Reader& r, const std::vector<bool>& windowed, int window, const std::string& keys,
                       ModelSpec& m) {
  const auto count = std::count(windowed.begin(), windowed.end(), true);
  if (count == 0 || window <= 0) {
    m.sliding_window = 0;
    m.window_layers = WindowLayers::All;
    return;
  }
  m.sliding_window = window;
  bool even = true, odd = true;
  for (size_t l = 0; l < windowed.size(); ++l) {
    even = even && windowed[l] == (l % 2 == 0);
    odd = odd && windowed[l] == (l % 2 == 1);
  }
  if (size_t(count) == windowed.size()) {
    m.window_layers = WindowLayers::All;
  } else if (even || odd) {
    m.window_layers = even ? WindowLayers::Even : WindowLayers::Odd;
  } else {
    const std::string first = keys.substr(0, keys.find(','));
    r.fail(first, fmt::format("({}) put the sliding window on {} of {} layers in a pattern that is neither all, "
                              "the even nor the odd layers: not modelled",
                              keys, count, windowed.size()));
  }
}

bool read_layer_types(const Reader& r, int window, ModelSpec& m) {
  const nlohmann::json* types = r.value("layer_types");
  if (types == nullptr) return false;
  if (!types->is_array() || types->size() != size_t(std::max(m.layers, 0)))
    r.fail("layer_types", fmt::format("expected a list of {} layer types", m.layers));
  std::vector<bool> windowed;
  for (const auto& t : *types) {
    if (t != "full_attention" && t != "sliding_attention") {
      const std::string got = t.is_string() ? fmt::format("'{}'", t.get<std::string>()) : "a non-string";
      r.fail("layer_types", "only full_attention and sliding_attention layers are modelled, got " + got);
    }
    windowed.push_back(t == "sliding_attention");
  }
  set_window_layers(r, windowed, window, "layer_types", m);
  return true;
}

void refuse_unmodelled_architecture(const Reader& r) {
  const std::string type = r.opt_string({"model_type"}).value_or("");
  const bool mla = std::find(kMlaTypes.begin(), kMlaTypes.end(), type) != kMlaTypes.end() ||
                   !r.present({"kv_lora_rank"}).empty();
  const std::string latent = mla ? " and multi-head latent attention (kv_lora_rank) is not modelled either" : "";
  for (const std::string& key : kExpertCountKeys) {
    if (auto n = r.opt_int({key}); n && *n > 1) {
      r.fail(key, fmt::format("{} experts: mixture-of-experts MLPs are not modelled{}. {}", *n, latent, kDense));
    }
  }
  if (std::find(kMoeTypes.begin(), kMoeTypes.end(), type) != kMoeTypes.end()) {
    r.fail("model_type", fmt::format("'{}' is a mixture-of-experts model: experts are not modelled{}. {}", type,
                                     latent, kDense));
  }
  if (mla) {
    r.fail(r.present({"kv_lora_rank"}).empty() ? "model_type" : "kv_lora_rank",
           std::string("multi-head latent attention is not modelled. ") + kDense);
  }
  if (type == "olmo") {
    r.fail("model_type", std::string("OLMo 1 normalizes with a LayerNorm without parameters (no gamma, no beta), "
                                     "which is not modelled; OLMo 2 (model_type olmo2) is supported. ") + kDense);
  }
}

}  // namespace domino::hf
