// hf_families_test.cpp: each family's published config.json (tests/data/hf) imports with the structure its
// model card and transformers code describe: norm, gating, positions, biases, residual layout, norm
// placement, QK-norm, head dimension, KV heads, tied head, sliding window, and the published parameter count.
#include <gtest/gtest.h>

#include "sim/model/hf_import.hpp"
#include "sim/model/model_spec.hpp"

namespace domino {
namespace {

const std::string kHf = std::string(DOMINO_TEST_DATA) + "/data/hf/";

ModelSpec load(const std::string& file) { return load_model(kHf + file); }
double billions(const ModelSpec& m) { return double(derive_facts(m).total_params) / 1e9; }

TEST(HfFamilies, Llama31GroupedQueryUntied) {
  const ModelSpec m = load("llama-3.1-8b.json");
  EXPECT_EQ(m.family, Family::Llama);
  EXPECT_EQ(m.norm, NormKind::RmsNorm);
  EXPECT_EQ(m.activation, Activation::Swiglu);
  EXPECT_EQ(m.positions, Positions::Rotary);
  EXPECT_EQ(m.kv_heads, 8);
  EXPECT_FALSE(m.qkv_bias || m.proj_bias || m.mlp_bias);
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_EQ(m.sliding_window, 0);
  EXPECT_NEAR(billions(m), 8.03, 0.03);  // Llama 3.1 8B: 8.03B
}

TEST(HfFamilies, MistralSlidingWindowOnEveryLayer) {
  const ModelSpec m = load("mistral-7b.json");
  EXPECT_EQ(m.sliding_window, 4096);
  EXPECT_EQ(m.window_layers, WindowLayers::All);
  EXPECT_FALSE(m.tied_embeddings);
}

TEST(HfFamilies, Qwen25QkvBiasOnly) {
  const ModelSpec m = load("qwen2.5-7b.json");
  EXPECT_TRUE(m.qkv_bias);
  EXPECT_FALSE(m.proj_bias);
  EXPECT_FALSE(m.mlp_bias);
  EXPECT_EQ(m.kv_heads, 4);
  EXPECT_EQ(m.sliding_window, 0);  // use_sliding_window: false
  EXPECT_EQ(m.qk_norm, QkNorm::None);
  EXPECT_NEAR(billions(m), 7.61, 0.03);  // Qwen2.5-7B: 7.61B
}

TEST(HfFamilies, Qwen3PerHeadQkNormAndDecoupledHeadDim) {
  const ModelSpec big = load("qwen3-8b.json");
  EXPECT_EQ(big.qk_norm, QkNorm::PerHead);
  EXPECT_EQ(big.head_dim(), 128);
  EXPECT_EQ(big.attn_width(), big.hidden);  // 32 x 128 = 4096
  EXPECT_FALSE(big.tied_embeddings);
  EXPECT_NEAR(billions(big), 8.19, 0.03);  // Qwen3-8B: 8.2B
  const ModelSpec small = load("qwen3-0.6b.json");
  EXPECT_EQ(small.head_dim(), 128);  // not 1024 / 16
  EXPECT_EQ(small.attn_width(), 2048);
  EXPECT_TRUE(small.tied_embeddings);
  EXPECT_NEAR(billions(small), 0.596, 0.01);  // Qwen3-0.6B: 0.6B, 0.44B without the embedding
}

TEST(HfFamilies, GemmaGatedGeluWideHeadsTied) {
  const ModelSpec m = load("gemma-7b.json");
  EXPECT_EQ(m.activation, Activation::Geglu);
  EXPECT_EQ(m.norm, NormKind::RmsNorm);
  EXPECT_EQ(m.head_dim(), 256);
  EXPECT_EQ(m.attn_width(), 4096);  // wider than hidden 3072
  EXPECT_EQ(m.kv_heads, 16);
  EXPECT_TRUE(m.tied_embeddings);
  EXPECT_NEAR(billions(m), 8.54, 0.03);  // Gemma 7B: 8.54B
}

TEST(HfFamilies, Gemma2SandwichNormsAndWindowOnEvenLayers) {
  const ModelSpec m = load("gemma2-9b.json");
  EXPECT_EQ(m.norm_placement, NormPlacement::Sandwich);
  EXPECT_EQ(m.sliding_window, 4096);
  EXPECT_EQ(m.window_layers, WindowLayers::Even);
  EXPECT_TRUE(m.windowed(0));
  EXPECT_FALSE(m.windowed(1));
  EXPECT_EQ(m.activation, Activation::Geglu);
  EXPECT_EQ(m.kv_heads, 8);
  EXPECT_TRUE(m.tied_embeddings);
  EXPECT_NEAR(billions(m), 9.24, 0.03);  // Gemma 2 9B: 9.24B
}

TEST(HfFamilies, Phi3MiniWindowUntied) {
  const ModelSpec m = load("phi3-mini-4k.json");
  EXPECT_EQ(m.activation, Activation::Swiglu);
  EXPECT_EQ(m.sliding_window, 2047);
  EXPECT_EQ(m.window_layers, WindowLayers::All);
  EXPECT_FALSE(m.qkv_bias || m.proj_bias || m.mlp_bias);
  EXPECT_NEAR(billions(m), 3.82, 0.03);  // Phi-3-mini: 3.8B
}

TEST(HfFamilies, StarCoder2LayerNormGeluBiasesTied) {
  const ModelSpec m = load("starcoder2-7b.json");
  EXPECT_EQ(m.norm, NormKind::LayerNorm);
  EXPECT_EQ(m.activation, Activation::Gelu);
  EXPECT_EQ(m.positions, Positions::Rotary);
  EXPECT_TRUE(m.qkv_bias && m.proj_bias && m.mlp_bias);
  EXPECT_EQ(m.kv_heads, 4);
  EXPECT_EQ(m.sliding_window, 4096);
  EXPECT_TRUE(m.tied_embeddings);  // Starcoder2Config's default
  EXPECT_NEAR(billions(m), 7.17, 0.03);  // StarCoder2-7B: 7.17B
}

TEST(HfFamilies, Olmo2PostNormAndFullQkNorm) {
  const ModelSpec m = load("olmo2-7b.json");
  EXPECT_EQ(m.norm_placement, NormPlacement::Post);
  EXPECT_EQ(m.qk_norm, QkNorm::Full);
  EXPECT_EQ(m.norm, NormKind::RmsNorm);
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_NEAR(billions(m), 7.30, 0.03);  // OLMo 2 7B: 7.3B
}

TEST(HfFamilies, Falcon7bMultiQueryParallelSharedNorm) {
  const ModelSpec m = load("falcon-7b-instruct.json");
  EXPECT_EQ(m.kv_heads, 1);
  EXPECT_EQ(m.residual, Residual::Parallel);
  EXPECT_TRUE(m.shared_norm);
  EXPECT_FALSE(m.qkv_bias || m.proj_bias || m.mlp_bias);
  EXPECT_EQ(m.positions, Positions::Rotary);
  EXPECT_EQ(m.ffn_hidden, 4 * 4544);
  EXPECT_TRUE(m.tied_embeddings);
  EXPECT_EQ(m.seq_len, 2048);  // FalconConfig's default; the file has none
  EXPECT_EQ(m.notes.size(), 1u);
}

TEST(HfFamilies, Falcon40bNewArchitectureTwoNorms) {
  const ModelSpec m = load("falcon-40b.json");
  EXPECT_EQ(m.kv_heads, 8);
  EXPECT_EQ(m.residual, Residual::Parallel);
  EXPECT_FALSE(m.shared_norm);  // ln_attn and ln_mlp
  EXPECT_TRUE(m.tied_embeddings);
  // The hub lists 41.8B, counting a stored copy of the tied head (65024 x 8192) that transformers ties back.
  EXPECT_NEAR(billions(m) + 65024.0 * 8192 / 1e9, 41.8, 0.1);
}

TEST(HfFamilies, GptjPartialRotaryParallelOneNorm) {
  const ModelSpec m = load("gpt-j-6b.json");
  EXPECT_EQ(m.head_dim(), 256);
  EXPECT_EQ(m.rotated_dims(), 64);
  EXPECT_EQ(m.residual, Residual::Parallel);
  EXPECT_TRUE(m.shared_norm);
  EXPECT_FALSE(m.qkv_bias || m.proj_bias);
  EXPECT_TRUE(m.mlp_bias);
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_NEAR(billions(m), 6.05, 0.03);  // GPT-J 6B: 6.05B (its head's bias aside)
}

TEST(HfFamilies, GptNeoLocalOddLayersLearnedTied) {
  const ModelSpec m = load("gpt-neo-1.3b.json");
  EXPECT_EQ(m.positions, Positions::Learned);
  EXPECT_EQ(m.sliding_window, 256);
  EXPECT_EQ(m.window_layers, WindowLayers::Odd);  // global, local, global, ...
  EXPECT_FALSE(m.qkv_bias);
  EXPECT_TRUE(m.proj_bias && m.mlp_bias);
  EXPECT_TRUE(m.tied_embeddings);
  EXPECT_NEAR(billions(m), 1.316, 0.01);  // GPT-Neo 1.3B: 1.32B
}

TEST(HfFamilies, GptNeoxQuarterRotaryTwoNorms) {
  const ModelSpec m = load("gpt-neox-20b.json");
  EXPECT_EQ(m.rotated_dims(), 24);  // rotary_pct 0.25 of 96
  EXPECT_EQ(m.residual, Residual::Parallel);
  EXPECT_FALSE(m.shared_norm);
  EXPECT_TRUE(m.qkv_bias && m.proj_bias && m.mlp_bias);
  EXPECT_FALSE(m.tied_embeddings);
}

TEST(HfFamilies, OptReluLearnedTied) {
  const ModelSpec m = load("opt-1.3b.json");
  EXPECT_EQ(m.activation, Activation::Relu);
  EXPECT_EQ(m.positions, Positions::Learned);
  EXPECT_EQ(m.ffn_hidden, 8192);
  EXPECT_TRUE(m.tied_embeddings);
  EXPECT_TRUE(m.qkv_bias && m.proj_bias && m.mlp_bias);
  EXPECT_NEAR(billions(m), 1.316, 0.01);  // OPT-1.3B: 1.32B
}

// The summary names what the import read: the model_type, the block structure and the attention features.
TEST(HfFamilies, SummaryNamesTheModelTypeAndStructure) {
  const std::string gemma2 = model_summary(load("gemma2-9b.json"));
  for (const char* part : {"(Hugging Face model_type gemma2)", "sandwich-norm", "tied to the head",
                           "decoupled head dim (attention width 4096 vs hidden 3584)", "sliding window 4096 on even"}) {
    EXPECT_NE(gemma2.find(part), std::string::npos) << part << " in:\n" << gemma2;
  }
  const std::string neox = model_summary(load("gpt-neox-20b.json"));
  for (const char* part : {"(Hugging Face model_type gpt_neox)", "parallel residual (a norm per block)",
                           "rotary (24 of 96 dims per head)"}) {
    EXPECT_NE(neox.find(part), std::string::npos) << part << " in:\n" << neox;
  }
}

}  // namespace
}  // namespace domino
