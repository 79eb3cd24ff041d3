// model_spec_test.cpp: derived facts against independent closed forms, the fingerprint's sensitivity, the
// validation rules (KV-head replication included) and the summary.
#include "sim/model/model_spec.hpp"

#include <gtest/gtest.h>

#include "sim/base/error.hpp"

namespace domino {
namespace {

ModelSpec llama_like() {
  ModelSpec m = default_model();
  m.name = "llama-like";
  m.family = Family::Llama, m.positions = Positions::Rotary;
  m.kv_heads = 4;
  m.ffn_hidden = 1024;
  m.activation = Activation::Swiglu;
  m.norm = NormKind::RmsNorm;
  m.set_biases(false);
  return m;
}

TEST(ModelSpec, EnumNamesAndDtypeBytes) {
  EXPECT_STREQ(to_string(Family::Gpt), "gpt");
  EXPECT_STREQ(to_string(Family::Llama), "llama");
  EXPECT_STREQ(to_string(Activation::Swiglu), "swiglu");
  EXPECT_STREQ(to_string(NormKind::RmsNorm), "rmsnorm");
  EXPECT_STREQ(to_string(DType::FP16), "fp16");
  EXPECT_EQ(dtype_bytes(DType::BF16), 2);
  EXPECT_EQ(dtype_bytes(DType::FP16), 2);
  EXPECT_EQ(dtype_bytes(DType::FP32), 4);
}

TEST(ModelSpec, GptLayerIsTwelveHSquaredPlusThirteenH) {
  // Closed form of a Megatron GPT layer with biases, LayerNorm and a 4h FFN: 12h^2 + 13h.
  const ModelSpec m = default_model();
  const int64_t h = m.hidden;
  const ModelFacts f = derive_facts(m);
  EXPECT_EQ(f.params_per_layer, 12 * h * h + 13 * h);
  EXPECT_EQ(f.embedding_params, int64_t(m.vocab) * h + int64_t(m.seq_len) * h);
  EXPECT_EQ(f.head_params, 2 * h + h * m.vocab);
  EXPECT_EQ(f.total_params, m.layers * f.params_per_layer + f.embedding_params + f.head_params);
  const double flops = 6.0 * m.layers * 12.0 * h * h + 12.0 * m.layers * m.seq_len * h + 6.0 * h * m.vocab;
  EXPECT_DOUBLE_EQ(f.train_flops_per_token, flops);
  EXPECT_EQ(f.allreduce_bytes, int64_t(8) * 128 * 384 * 4);
  EXPECT_EQ(f.allreduces_per_layer, 4);
}

TEST(ModelSpec, LlamaLayerWithGroupedQueryAttention) {
  const ModelSpec m = llama_like();
  const int64_t h = m.hidden, d = h / m.heads, ffn = m.ffn_hidden;
  const int64_t gemm = h * (m.heads + 2 * m.kv_heads) * d + h * h + 3 * h * ffn;
  const ModelFacts f = derive_facts(m);
  EXPECT_EQ(f.params_per_layer, gemm + 2 * h);          // two RMSNorm gammas, no biases
  EXPECT_EQ(f.embedding_params, int64_t(m.vocab) * h);  // rotary: no learned positions
  EXPECT_EQ(f.head_params, h + h * m.vocab);
}

TEST(ModelSpec, PerRankParamsShardLayersTokenEmbeddingAndHead) {
  const ModelSpec m = default_model();  // tp 2
  const int64_t h = m.hidden;
  const ModelFacts f = derive_facts(m);
  // Sharded GEMM weights and column-parallel biases halve; projection/FC2 biases and norms stay whole.
  const int64_t rank_layer = 12 * h * h / 2 + (3 * h + 4 * h) / 2 + 2 * h + 4 * h;
  // Vocab-parallel: half the token embedding and half the head; positions and the final norm whole.
  const int64_t ends = m.vocab / 2 * h + int64_t(m.seq_len) * h + 2 * h + h * m.vocab / 2;
  EXPECT_EQ(f.params_per_rank, m.layers * rank_layer + ends);
  EXPECT_LT(f.params_per_rank, f.total_params);
}

TEST(ModelSpec, UnevenVocabularyShardsArePadded) {
  ModelSpec m = default_model();
  m.vocab = 50257;
  m.tp = 8;
  EXPECT_EQ(m.vocab_per_rank(), 6283);  // 8 x 6283 = 50264: 7 padding ids on the last rank
  const ModelFacts f = derive_facts(m);
  ModelSpec even = m;
  even.vocab = 8 * 6283;
  // A rank holds its padded shard: the same as with a vocabulary tp divides, whatever the padding.
  EXPECT_EQ(f.params_per_rank, derive_facts(even).params_per_rank);
  EXPECT_NE(model_summary(m).find("vocab 6283 (padded to 50264)"), std::string::npos) << model_summary(m);
}

// Megatron's --make-vocab-size-divisible-by 128: GPT-2's 50257 ids padded to 51200 at tp 8 (shards of 6400),
// 50304 at tp 1; the fingerprint tells the padded model from the unpadded one.
TEST(ModelSpec, VocabularyPaddedToAMultipleOfDivisibleByTimesTp) {
  ModelSpec m = default_model();
  m.vocab = 50257;
  m.vocab_divisible_by = 128;
  m.tp = 8;
  EXPECT_EQ(m.vocab_per_rank(), 6400);
  EXPECT_NE(model_summary(m).find("vocab 6400 (padded to 51200)"), std::string::npos) << model_summary(m);
  m.tp = 1;
  EXPECT_EQ(m.vocab_per_rank(), 50304);
  ModelSpec unpadded = m;
  unpadded.vocab_divisible_by = 1;
  EXPECT_EQ(unpadded.vocab_per_rank(), 50257);
  EXPECT_NE(model_fingerprint(m), model_fingerprint(unpadded));
  EXPECT_GT(derive_facts(m).params_per_rank, derive_facts(unpadded).params_per_rank);
}

TEST(ModelSpec, KvHeadsSplitOrReplicated) {
  ModelSpec m = llama_like();  // 8 heads, 4 KV heads
  m.tp = 2;
  EXPECT_NO_THROW(validate_model(m));
  EXPECT_EQ(m.kv_heads_per_rank(), 2);
  m.tp = 8;  // 8 is a multiple of 4: each KV head is replicated on two ranks
  EXPECT_NO_THROW(validate_model(m));
  EXPECT_EQ(m.kv_heads_per_rank(), 1);
  // Replication still counts one KV head per rank in the per-rank parameters.
  const ModelFacts f = derive_facts(m);
  EXPECT_GT(f.params_per_rank * m.tp, f.total_params - f.embedding_params - f.head_params);
}

TEST(ModelSpec, ValidationNamesSourceAndKey) {
  ModelSpec m = default_model();
  m.source = "somewhere.yaml";
  m.tp = 3;
  try {
    validate_model(m);
    FAIL() << "tp 3 with 8 heads must be rejected";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find("somewhere.yaml: model 'tp': tp 3 does not divide heads 8"),
              std::string::npos)
        << e.what();
  }
  m = llama_like();
  m.heads = 12;
  m.kv_heads = 6;
  m.tp = 4;
  EXPECT_THROW(validate_model(m), Error);  // neither 6 % 4 nor 4 % 6
  m = default_model();
  m.micro_batch = 0;
  EXPECT_THROW(derive_facts(m), Error);  // derive_facts never divides by a bad size
  m = default_model();
  m.name.clear();
  EXPECT_THROW(validate_model(m), Error);
}

TEST(ModelSpec, LargestAllowedSizesDoNotOverflow) {
  // Every size at its validation bound: the counts must stay exact in int64 (UBSan would abort otherwise).
  ModelSpec m = default_model();
  m.layers = 1 << 14;
  m.hidden = 1 << 20;
  m.heads = m.kv_heads = 1 << 16;
  m.ffn_hidden = 1 << 22;
  m.activation = Activation::Swiglu;
  m.vocab = 1 << 24;
  m.seq_len = 1 << 22;
  m.micro_batch = 1 << 16;
  m.tp = m.gpus_per_node = 1 << 16;
  const ModelFacts f = derive_facts(m);
  EXPECT_GT(f.total_params, 0);
  EXPECT_GT(f.params_per_rank, 0);
  EXPECT_EQ(f.allreduce_bytes, int64_t(1) << 60);
  EXPECT_FALSE(model_summary(m).empty());
  m.layers = (1 << 14) + 1;
  EXPECT_THROW(validate_model(m), Error);
}

TEST(ModelSpec, SwigluWithLayerNormIsAllowed) {
  ModelSpec m = default_model();
  m.activation = Activation::Swiglu;
  EXPECT_NO_THROW(validate_model(m));
  EXPECT_EQ(derive_facts(m).params_per_layer - derive_facts(default_model()).params_per_layer,
            int64_t(m.hidden) * m.ffn_hidden + m.ffn_hidden);  // the extra gate projection and its bias
}

TEST(ModelSpec, FingerprintCoversScheduleFieldsButNotName) {
  const ModelSpec base = default_model();
  const std::string fp = model_fingerprint(base);
  EXPECT_EQ(fp.size(), 16u);
  EXPECT_EQ(fp, model_fingerprint(default_model()));  // stable

  ModelSpec renamed = base;
  renamed.name = "other";
  renamed.source = "elsewhere.yaml";
  EXPECT_EQ(model_fingerprint(renamed), fp);

  const std::vector<std::pair<const char*, void (*)(ModelSpec&)>> changes = {
      {"family", [](ModelSpec& m) { m.family = Family::Llama; }},
      {"layers", [](ModelSpec& m) { m.layers = 5; }},
      {"hidden", [](ModelSpec& m) { m.hidden = 512; }},
      {"heads", [](ModelSpec& m) { m.heads = 4; }},
      {"kv_heads", [](ModelSpec& m) { m.kv_heads = 4; }},
      {"ffn_hidden", [](ModelSpec& m) { m.ffn_hidden = 1024; }},
      {"activation", [](ModelSpec& m) { m.activation = Activation::Swiglu; }},
      {"norm", [](ModelSpec& m) { m.norm = NormKind::RmsNorm; }},
      {"bias", [](ModelSpec& m) { m.set_biases(false); }},
      {"vocab", [](ModelSpec& m) { m.vocab = 2048; }},
      {"seq_len", [](ModelSpec& m) { m.seq_len = 256; }},
      {"micro_batch", [](ModelSpec& m) { m.micro_batch = 4; }},
      {"dtype", [](ModelSpec& m) { m.dtype = DType::BF16; }},
      {"tp", [](ModelSpec& m) { m.tp = 4; }},
      {"gpus_per_node", [](ModelSpec& m) { m.gpus_per_node = 4; }},
      {"head_dim", [](ModelSpec& m) { m.head_size = 64; }},
      {"qkv_bias", [](ModelSpec& m) { m.qkv_bias = false; }},
      {"mlp_bias", [](ModelSpec& m) { m.mlp_bias = false; }},
      {"positions", [](ModelSpec& m) { m.positions = Positions::Rotary; }},
      {"rotary_dims", [](ModelSpec& m) { m.positions = Positions::Rotary, m.rotary_dims = 16; }},
      {"residual", [](ModelSpec& m) { m.residual = Residual::Parallel; }},
      {"norm_placement", [](ModelSpec& m) { m.norm_placement = NormPlacement::Sandwich; }},
      {"qk_norm", [](ModelSpec& m) { m.qk_norm = QkNorm::PerHead; }},
      {"tied_embeddings", [](ModelSpec& m) { m.tied_embeddings = true; }},
      {"sliding_window", [](ModelSpec& m) { m.sliding_window = 64; }},
  };
  for (const auto& [field, change] : changes) {
    ModelSpec m = base;
    change(m);
    EXPECT_NE(model_fingerprint(m), fp) << field << " must change the fingerprint";
  }
}

TEST(ModelSpec, SummaryShowsShapesAndFacts) {
  const std::string s = model_summary(default_model());
  for (const char* part : {"model cpu-gpt (gpt family) from <embedded>", "layers 4, hidden 384, heads 8",
                           "tp 2", "per rank: 4 heads, 4 kv heads, ffn 768, vocab 512", "1.50 MiB", "fingerprint"}) {
    EXPECT_NE(s.find(part), std::string::npos) << "missing '" << part << "' in:\n" << s;
  }
  ModelSpec m = llama_like();
  m.tp = 8;
  EXPECT_NE(model_summary(m).find("(replicated)"), std::string::npos);
}

}  // namespace
}  // namespace domino
