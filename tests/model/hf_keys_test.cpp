// hf_keys_test.cpp: every config.json key the importer models changes the imported model when its value
// changes (or when it is removed and the family's default applies), and every key it refuses is named.
// Each test edits a published config (tests/data/hf) so the rest of the file stays real.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "sim/base/error.hpp"
#include "sim/model/hf_import.hpp"
#include "sim/model/model_spec.hpp"

namespace domino {
namespace {

using nlohmann::json;

const std::string kHf = std::string(DOMINO_TEST_DATA) + "/data/hf/";

json config(const std::string& file) {
  std::ifstream in(kHf + file);
  return json::parse(in);
}

ModelSpec import(const json& j) { return import_hf_config(j.dump(2), "config.json", {}); }

// The BadInput message of importing `j` ("" and a test failure when it imports).
std::string refusal(const json& j) {
  try {
    import(j);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "imported";
  return "";
}

bool has(const std::string& message, const std::string& part) { return message.find(part) != std::string::npos; }

TEST(HfKeys, LlamaBiasesAndHeadDim) {
  json j = config("llama-3.1-8b.json");
  j["attention_bias"] = true;
  ModelSpec m = import(j);
  EXPECT_TRUE(m.qkv_bias && m.proj_bias);
  EXPECT_FALSE(m.mlp_bias);
  j["mlp_bias"] = true;
  EXPECT_TRUE(import(j).mlp_bias);
  // Mistral NeMo's layout: head_dim 128 with hidden 5120 / 32 heads.
  j["hidden_size"] = 5120;
  j["head_dim"] = 128;
  m = import(j);
  EXPECT_EQ(m.head_dim(), 128);
  EXPECT_EQ(m.attn_width(), 4096);
  j["num_key_value_heads"] = 32;
  EXPECT_EQ(import(j).kv_heads, 32);
}

TEST(HfKeys, TiedEmbeddingsKeyAndFamilyDefaults) {
  json llama = config("llama-3.1-8b.json");
  llama["tie_word_embeddings"] = true;  // Llama 3.2 1B/3B
  EXPECT_TRUE(import(llama).tied_embeddings);
  llama.erase("tie_word_embeddings");
  EXPECT_FALSE(import(llama).tied_embeddings);  // LlamaConfig's default
  json gemma = config("gemma-7b.json");         // no key: GemmaConfig's default ties
  EXPECT_TRUE(import(gemma).tied_embeddings);
  gemma["tie_word_embeddings"] = false;
  EXPECT_FALSE(import(gemma).tied_embeddings);
  json gptj = config("gpt-j-6b.json");
  gptj.erase("tie_word_embeddings");
  EXPECT_FALSE(import(gptj).tied_embeddings);  // GPTJConfig's default: GPT-J's head is its own
}

TEST(HfKeys, MistralWindowNullAbsentAndSized) {
  json j = config("mistral-7b.json");
  j["sliding_window"] = nullptr;  // Mistral 7B v0.2: no window
  EXPECT_EQ(import(j).sliding_window, 0);
  j["sliding_window"] = 1024;
  EXPECT_EQ(import(j).sliding_window, 1024);
  j.erase("sliding_window");
  EXPECT_EQ(import(j).sliding_window, 4096);  // MistralConfig's default
}

TEST(HfKeys, QwenWindowLayersFromMaxWindowLayers) {
  json j = config("qwen2.5-7b.json");
  j["use_sliding_window"] = true;
  j["sliding_window"] = 4096;
  j["max_window_layers"] = 28;  // every layer is below it: none uses the window
  EXPECT_EQ(import(j).sliding_window, 0);
  j["max_window_layers"] = 0;  // every layer from 0 on
  ModelSpec m = import(j);
  EXPECT_EQ(m.sliding_window, 4096);
  EXPECT_EQ(m.window_layers, WindowLayers::All);
  j["sliding_window"] = nullptr;  // said to be none: no window, whatever use_sliding_window says
  EXPECT_EQ(import(j).sliding_window, 0);
  j.erase("sliding_window");  // not said: Qwen2Config's default
  EXPECT_EQ(import(j).sliding_window, 4096);
  j["sliding_window"] = 4096;
  j["max_window_layers"] = 14;  // the upper half: not all, even or odd
  const std::string msg = refusal(j);
  EXPECT_TRUE(has(msg, "use_sliding_window, max_window_layers")) << msg;
  // A layer_types list decides instead.
  json types = json::array();
  for (int l = 0; l < 28; ++l) types.push_back(l % 2 ? "full_attention" : "sliding_attention");
  j["layer_types"] = types;
  m = import(j);
  EXPECT_EQ(m.window_layers, WindowLayers::Even);
  j["layer_types"][3] = "chunked_attention";
  EXPECT_TRUE(has(refusal(j), "'layer_types'"));
}

TEST(HfKeys, QkNormAndNormPlacementComeWithTheFamily) {
  json olmo2 = config("olmo2-7b.json");
  olmo2["model_type"] = "llama";  // the same keys read as Llama: no QK-norm, pre-norm
  ModelSpec m = import(olmo2);
  EXPECT_EQ(m.qk_norm, QkNorm::None);
  EXPECT_EQ(m.norm_placement, NormPlacement::Pre);
  json qwen3 = config("qwen3-8b.json");
  for (const char* key : {"max_window_layers", "use_sliding_window", "sliding_window"}) qwen3.erase(key);
  EXPECT_EQ(import(qwen3).qk_norm, QkNorm::PerHead);
  qwen3["model_type"] = "llama";
  EXPECT_EQ(import(qwen3).qk_norm, QkNorm::None);
}

TEST(HfKeys, Gemma2WindowAndGemmaActivation) {
  json g2 = config("gemma2-9b.json");
  g2["sliding_window"] = 1024;
  EXPECT_EQ(import(g2).sliding_window, 1024);
  g2["sliding_window"] = nullptr;
  EXPECT_EQ(import(g2).sliding_window, 0);
  json gemma = config("gemma-7b.json");
  gemma["hidden_activation"] = "silu";  // read before hidden_act
  EXPECT_EQ(import(gemma).activation, Activation::Swiglu);
  gemma["hidden_activation"] = "relu";  // a gated ReLU is not modelled
  EXPECT_TRUE(has(refusal(gemma), "'hidden_activation'"));
}

TEST(HfKeys, PartialRotaryKeys) {
  json phi = config("phi3-mini-4k.json");
  phi["partial_rotary_factor"] = 0.75;  // Phi-3.5-style partial rotary
  EXPECT_EQ(import(phi).rotated_dims(), 72);
  phi["partial_rotary_factor"] = 0.3;  // 28.8 dims
  EXPECT_TRUE(has(refusal(phi), "'partial_rotary_factor'"));
  json neox = config("gpt-neox-20b.json");
  neox["rotary_pct"] = 0.5;
  EXPECT_EQ(import(neox).rotated_dims(), 48);
  neox.erase("rotary_pct");
  EXPECT_EQ(import(neox).rotated_dims(), 24);  // GPTNeoXConfig's default 0.25
  json gptj = config("gpt-j-6b.json");
  gptj["rotary_dim"] = nullptr;  // the whole head
  EXPECT_EQ(import(gptj).rotated_dims(), 256);
}

TEST(HfKeys, NeoxParallelResidualAndBias) {
  json j = config("gpt-neox-20b.json");
  j["use_parallel_residual"] = false;
  EXPECT_EQ(import(j).residual, Residual::Sequential);
  j["attention_bias"] = false;
  const ModelSpec m = import(j);
  EXPECT_FALSE(m.qkv_bias || m.proj_bias);
  EXPECT_TRUE(m.mlp_bias);
}

TEST(HfKeys, FalconLayoutKeys) {
  json j = config("falcon-7b-instruct.json");
  j["multi_query"] = false;
  EXPECT_EQ(import(j).kv_heads, 71);
  j["bias"] = true;
  EXPECT_TRUE(import(j).qkv_bias);
  j["num_ln_in_parallel_attn"] = 2;
  EXPECT_FALSE(import(j).shared_norm);
  j["parallel_attn"] = false;
  EXPECT_EQ(import(j).residual, Residual::Sequential);
  json big = config("falcon-40b.json");
  big["num_kv_heads"] = 16;
  EXPECT_EQ(import(big).kv_heads, 16);
  big["num_ln_in_parallel_attn"] = 1;
  EXPECT_TRUE(import(big).shared_norm);
  big["new_decoder_architecture"] = false;  // then multi_query (default true) decides
  EXPECT_EQ(import(big).kv_heads, 1);
  json alibi = config("falcon-7b-instruct.json");
  alibi["alibi"] = true;
  EXPECT_TRUE(has(refusal(alibi), "'alibi'"));
  alibi["alibi"] = false;
  alibi["apply_residual_connection_post_layernorm"] = true;
  EXPECT_TRUE(has(refusal(alibi), "'apply_residual_connection_post_layernorm'"));
}

TEST(HfKeys, StarCoder2BiasAndWindow) {
  json j = config("starcoder2-7b.json");
  j["use_bias"] = false;
  EXPECT_FALSE(import(j).mlp_bias);
  j["sliding_window"] = nullptr;
  EXPECT_EQ(import(j).sliding_window, 0);
}

TEST(HfKeys, GptNeoAttentionTypes) {
  json j = config("gpt-neo-1.3b.json");
  j["attention_types"] = json::parse(R"([[["local", "global"], 12]])");
  EXPECT_EQ(import(j).window_layers, WindowLayers::Even);
  j["window_size"] = 128;
  EXPECT_EQ(import(j).sliding_window, 128);
  j["attention_types"] = json::parse(R"([[["global"], 24]])");
  EXPECT_EQ(import(j).sliding_window, 0);
  j["attention_types"] = json::parse(R"([[["local"], 12], [["global"], 12]])");
  EXPECT_TRUE(has(refusal(j), "'attention_types'"));
  j["attention_types"] = json::parse(R"([[["global", "local"], 6]])");  // 12 layers for 24
  EXPECT_TRUE(has(refusal(j), "describes 12 layers"));
}

TEST(HfKeys, OptStructureKeys) {
  json j = config("opt-1.3b.json");
  j["enable_bias"] = false;
  EXPECT_FALSE(import(j).qkv_bias);
  j["activation_function"] = "gelu";
  EXPECT_EQ(import(j).activation, Activation::Gelu);
  j["activation_function"] = "silu";  // no plain SiLU MLP is modelled
  EXPECT_TRUE(has(refusal(j), "'activation_function'"));
  json post = config("opt-1.3b.json");
  post["do_layer_norm_before"] = false;  // OPT-350m
  EXPECT_TRUE(has(refusal(post), "'do_layer_norm_before'"));
  json proj = config("opt-1.3b.json");
  proj["word_embed_proj_dim"] = 512;
  EXPECT_TRUE(has(refusal(proj), "'word_embed_proj_dim'"));
  json affine = config("opt-1.3b.json");
  affine["layer_norm_elementwise_affine"] = false;
  EXPECT_TRUE(has(refusal(affine), "'layer_norm_elementwise_affine'"));
}

TEST(HfKeys, Gpt2CrossAttentionAndActivation) {
  json j = config("gpt2.json");
  j["add_cross_attention"] = true;
  EXPECT_TRUE(has(refusal(j), "'add_cross_attention'"));
  json relu = config("gpt2.json");
  relu["activation_function"] = "relu";
  EXPECT_EQ(import(relu).activation, Activation::Relu);
  json llama = config("llama-3.1-8b.json");
  llama["hidden_act"] = "gelu";  // a gated GeLU: GeGLU
  EXPECT_EQ(import(llama).activation, Activation::Geglu);
}

}  // namespace
}  // namespace domino
