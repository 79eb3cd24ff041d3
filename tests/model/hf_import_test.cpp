// hf_import_test.cpp: real Hugging Face config.json layouts (Llama-2, Mistral, GPT-2, GPT-NeoX) import
// with the right family, sizes and defaults, and take the command-line overrides; the sequence-length cap
// and its note; the architectures refused by name (experts, latent attention, OLMo 1) and unknown keys.
#include "sim/model/hf_import.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "sim/base/error.hpp"
#include "sim/model/model_spec.hpp"

namespace domino {
namespace {

const std::string kHf = std::string(DOMINO_TEST_DATA) + "/data/hf/";

TEST(HfImport, Llama2MatchesTheShippedYaml) {
  const ModelSpec hf = load_model(kHf + "llama-2-7b.json");
  EXPECT_EQ(hf.name, "meta-llama/Llama-2-7b-hf");
  EXPECT_EQ(hf.family, Family::Llama);
  EXPECT_EQ(hf.activation, Activation::Swiglu);
  EXPECT_EQ(hf.norm, NormKind::RmsNorm);
  EXPECT_FALSE(hf.qkv_bias || hf.proj_bias || hf.mlp_bias);
  EXPECT_EQ(hf.dtype, DType::FP16);
  EXPECT_EQ(hf.seq_len, 4096);  // max_position_embeddings, within the cap: no note
  EXPECT_TRUE(hf.notes.empty());
  EXPECT_EQ(hf.micro_batch, 1);
  EXPECT_EQ(hf.tp, 1);
  // Same architecture as configs/models/llama2-7b.yaml: identical parameter count.
  EXPECT_EQ(derive_facts(hf).total_params, derive_facts(load_model("llama2-7b")).total_params);
}

TEST(HfImport, MistralGroupedQueryAttention) {
  ModelOverrides o;
  o.tp = 8;
  o.seq_len = 1024;
  o.micro_batch = 4;
  const ModelSpec m = load_model(kHf + "mistral-7b.json", o);
  EXPECT_EQ(m.family, Family::Llama);
  EXPECT_EQ(m.kv_heads, 8);
  EXPECT_EQ(m.kv_heads_per_rank(), 1);
  EXPECT_EQ(m.ffn_hidden, 14336);
  EXPECT_EQ(m.dtype, DType::BF16);
  EXPECT_EQ(m.seq_len, 1024);
  EXPECT_EQ(m.micro_batch, 4);
  EXPECT_NEAR(double(derive_facts(m).total_params) / 1e9, 7.24, 0.05);  // Mistral 7B: 7.24B published
}

TEST(HfImport, Gpt2SpellingsAndDefaults) {
  const ModelSpec m = load_model(kHf + "gpt2.json");
  EXPECT_EQ(m.family, Family::Gpt);
  EXPECT_EQ(m.hidden, 768);
  EXPECT_EQ(m.layers, 12);
  EXPECT_EQ(m.heads, 12);
  EXPECT_EQ(m.kv_heads, 12);
  EXPECT_EQ(m.ffn_hidden, 4 * 768);  // n_inner absent
  EXPECT_EQ(m.activation, Activation::Gelu);
  EXPECT_EQ(m.norm, NormKind::LayerNorm);
  EXPECT_TRUE(m.qkv_bias && m.proj_bias && m.mlp_bias);
  EXPECT_EQ(m.seq_len, 1024);
  EXPECT_EQ(m.vocab, 50257);
  EXPECT_EQ(m.dtype, DType::BF16);  // no torch_dtype
  EXPECT_EQ(m.name, "gpt2");        // file stem
  EXPECT_TRUE(m.tied_embeddings);   // GPT2Config's default: the head is the token embedding
  EXPECT_NEAR(double(derive_facts(m).total_params) / 1e6, 124.4, 0.5);  // GPT-2 small: 124M published
}

TEST(HfImport, GptNeoX20B) {
  const ModelSpec m = load_model(kHf + "gpt-neox-20b.json");
  EXPECT_EQ(m.family, Family::Gpt);
  EXPECT_EQ(m.layers, 44);
  EXPECT_EQ(m.hidden, 6144);
  EXPECT_EQ(m.heads, 64);
  EXPECT_EQ(m.ffn_hidden, 24576);
  EXPECT_EQ(m.activation, Activation::Gelu);  // gelu_fast
  EXPECT_EQ(m.norm, NormKind::LayerNorm);
  EXPECT_EQ(m.dtype, DType::FP16);
  EXPECT_NEAR(double(derive_facts(m).total_params) / 1e9, 20.6, 0.4);  // published 20.6B
}

TEST(HfImport, CheckpointFolderAndDetectionByContent) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "domino-hf-checkpoint";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(kHf + "mistral-7b.json", dir / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  const ModelSpec m = load_model(dir.string());
  EXPECT_EQ(m.name, "domino-hf-checkpoint");  // the folder names the model
  EXPECT_EQ(m.kv_heads, 8);
  // A JSON object in a file with another extension is detected by content.
  const auto other = dir / "mistral.cfg";
  std::filesystem::copy_file(kHf + "mistral-7b.json", other,
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_EQ(load_model(other.string()).ffn_hidden, 14336);
  std::filesystem::remove_all(dir);
}

TEST(HfImport, SeqLenRequiredWhenConfigHasNone) {
  const std::string text = R"({"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 1000})";
  EXPECT_THROW(import_hf_config(text, "tiny.json", {}), Error);
  ModelOverrides o;
  o.seq_len = 64;
  EXPECT_EQ(import_hf_config(text, "tiny.json", o).seq_len, 64);
}

// A config nests a few levels; a hostile one nesting thousands is refused while it is parsed.
TEST(HfImport, NestingBeyondTheLimitIsBadInput) {
  const auto nested = [](int depth) {
    return R"({"model_type": "llama", "rope_scaling": )" + std::string(size_t(depth), '[') +
           std::string(size_t(depth), ']') + "}";
  };
  try {
    import_hf_config(nested(5000), "deep.json", {});
    FAIL() << "a config nested 5000 deep imported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find("JSON nested deeper than 64 levels"), std::string::npos) << e.what();
  }
  try {
    import_hf_config(nested(60), "shallow.json", {});
    FAIL() << "a config without its sizes imported";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("nested deeper"), std::string::npos) << e.what();
  }
}

TEST(HfImport, DetectionDistinguishesOurFormat) {
  EXPECT_TRUE(looks_like_hf_config(R"({"model_type": "gpt2"})"));
  EXPECT_FALSE(looks_like_hf_config(R"({"family": "gpt", "layers": 2})"));
  EXPECT_FALSE(looks_like_hf_config("family: gpt\n"));
  EXPECT_FALSE(looks_like_hf_config("{family: gpt}"));  // YAML flow mapping, not JSON
}


// The message of the BadInput the import of `path` throws ("" and a test failure when it imports).
std::string refusal(const std::string& path) {
  try {
    load_model(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput) << e.what();
    return e.what();
  }
  ADD_FAILURE() << path << " imported";
  return "";
}

std::string refusal_text(const std::string& text) {
  try {
    import_hf_config(text, "config.json", {});
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput) << e.what();
    return e.what();
  }
  ADD_FAILURE() << text << " imported";
  return "";
}

bool has(const std::string& message, const std::string& part) { return message.find(part) != std::string::npos; }

TEST(HfImport, MixtureOfExpertsRefusedNamingExpertsNotANearFamily) {
  const std::string m = refusal(kHf + "mixtral-8x7b-instruct.json");
  EXPECT_TRUE(has(m, "'num_local_experts'")) << m;
  EXPECT_TRUE(has(m, "experts are not modelled") || has(m, "mixture-of-experts MLPs are not modelled")) << m;
  EXPECT_TRUE(has(m, "dense decoder-only")) << m;  // says what is supported instead
  EXPECT_FALSE(has(m, "did you mean")) << m;
  // A MoE model type is refused as such even without an expert count.
  const std::string dbrx = refusal_text(R"({"model_type": "dbrx", "d_model": 6144})");
  EXPECT_TRUE(has(dbrx, "mixture-of-experts")) << dbrx;
  EXPECT_FALSE(has(dbrx, "did you mean")) << dbrx;
  const std::string qwen_moe = refusal_text(R"({"model_type": "qwen2_moe", "num_experts": 60})");
  EXPECT_TRUE(has(qwen_moe, "60 experts")) << qwen_moe;
}

TEST(HfImport, LatentAttentionRefusedNamingIt) {
  const std::string m = refusal(kHf + "deepseek-v2-lite.json");
  EXPECT_TRUE(has(m, "experts")) << m;
  EXPECT_TRUE(has(m, "latent attention")) << m;
  // Latent attention alone, in an otherwise dense config.
  const std::string mla = refusal_text(R"({"model_type": "llama", "kv_lora_rank": 512})");
  EXPECT_TRUE(has(mla, "latent attention")) << mla;
  EXPECT_TRUE(has(mla, "'kv_lora_rank'")) << mla;
}

TEST(HfImport, Olmo1NonParametricNormRefused) {
  const std::string m = refusal(kHf + "amd-olmo-1b-sft.json");
  EXPECT_TRUE(has(m, "LayerNorm without parameters")) << m;
  EXPECT_TRUE(has(m, "olmo2")) << m;
}

TEST(HfImport, UnknownKeysRefusedUnlessHarmlessOrNull) {
  std::ifstream in(kHf + "llama-3.1-8b.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_NO_THROW(import_hf_config(text, "llama.json", {}));
  const auto with = [&](const std::string& entry) { return "{" + entry + "," + text.substr(text.find('{') + 1); };
  const std::string unknown = refusal_text(with(R"("num_nextn_predict_layers": 1)"));
  EXPECT_TRUE(has(unknown, "'num_nextn_predict_layers'")) << unknown;
  EXPECT_TRUE(has(unknown, "unknown key for model_type 'llama'")) << unknown;
  // A key another family reads is not read by this one: refused too (transformers' Llama ignores it).
  EXPECT_TRUE(has(refusal_text(with(R"("parallel_attn": true)")), "'parallel_attn'"));
  // Null means "not set": harmless. Documented harmless keys (dropout, token ids) pass.
  EXPECT_NO_THROW(import_hf_config(with(R"("num_nextn_predict_layers": null)"), "llama.json", {}));
  EXPECT_NO_THROW(import_hf_config(with(R"("resid_pdrop": 0.1, "sep_token_id": 3)"), "llama.json", {}));
}

TEST(HfImport, SeqLenCappedWithANote) {
  const ModelSpec m = load_model(kHf + "llama-3.1-8b.json");
  EXPECT_EQ(m.seq_len, 4096);
  ASSERT_EQ(m.notes.size(), 1u);
  EXPECT_TRUE(has(m.notes[0], "seq_len 4096")) << m.notes[0];
  EXPECT_TRUE(has(m.notes[0], "131072")) << m.notes[0];
  EXPECT_TRUE(has(m.notes[0], "--seq-len")) << m.notes[0];
  EXPECT_TRUE(has(model_summary(m), "note: seq_len 4096")) << model_summary(m);
  ModelOverrides o;
  o.seq_len = 8192;
  const ModelSpec longer = load_model(kHf + "llama-3.1-8b.json", o);
  EXPECT_EQ(longer.seq_len, 8192);
  EXPECT_TRUE(longer.notes.empty());                         // the user chose: nothing to say
  EXPECT_TRUE(load_model(kHf + "gpt2.json").notes.empty());  // 1024 is within the cap
}

}  // namespace
}  // namespace domino
