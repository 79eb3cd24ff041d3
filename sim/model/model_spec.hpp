// model_spec.hpp: the model description (what is trained) and the facts derived from it in one place.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/model/training_context.hpp"

namespace domino {

// A family only chooses the defaults of a model file (gpt: learned positions, LayerNorm, GeLU, biases;
// llama: rotary, RMSNorm, SwiGLU, no biases); the schedule reads the structural fields below.
enum class Family { Gpt, Llama };
// Swiglu and Geglu are gated: FC1 holds the gate and up projections side by side.
enum class Activation { Gelu, Swiglu, Relu, Geglu };
enum class NormKind { LayerNorm, RmsNorm };
enum class DType { BF16, FP16, FP32 };
enum class Positions { Learned, Rotary };
// Sequential: x + attn(norm(x)), then + mlp(norm(.)). Parallel (GPT-J, GPT-NeoX, Falcon): attention and
// MLP both read the layer's input, x + attn(norm1(x)) + mlp(norm2(x)).
enum class Residual { Sequential, Parallel };
// Where a block's norms sit: before it (pre), on its output before the residual add (post, OLMo 2), or
// both (sandwich, Gemma 2).
enum class NormPlacement { Pre, Post, Sandwich };
// Normalization of queries and keys after the QKV projection: per head over head_dim (Qwen3), or over the
// whole projection (OLMo 2).
enum class QkNorm { None, PerHead, Full };
// Which layers use the sliding window (Gemma 2: even; GPT-Neo: odd, its "local" layers).
enum class WindowLayers { All, Even, Odd };

const char* to_string(Family f);
const char* to_string(Activation a);
const char* to_string(NormKind n);
const char* to_string(DType d);
const char* to_string(Positions p);
const char* to_string(Residual r);
const char* to_string(NormPlacement n);
const char* to_string(QkNorm q);
const char* to_string(WindowLayers w);
int dtype_bytes(DType d);

// The ids of a vocabulary of `vocab` each of `tp` ranks holds, padded to a multiple of `multiple` x tp.
inline int64_t vocab_shard_width(int64_t vocab, int64_t tp, int64_t multiple) {
  return (vocab + multiple * tp - 1) / (multiple * tp) * multiple;
}

struct ModelSpec {
  std::string name;
  Family family = Family::Gpt;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;  // grouped-query attention; equals heads for multi-head attention
  int ffn_hidden = 0;
  Activation activation = Activation::Gelu;
  NormKind norm = NormKind::LayerNorm;
  int head_size = 0;  // head dimension when decoupled from hidden / heads (Gemma, Qwen3); 0: hidden / heads
  // Linear-layer biases: QKV, the attention output projection, FC1 and FC2 (YAML `bias` sets all three).
  bool qkv_bias = true;
  bool proj_bias = true;
  bool mlp_bias = true;
  Positions positions = Positions::Learned;
  int rotary_dims = 0;  // rotary: leading dims of each head that are rotated; 0: all (GPT-J, GPT-NeoX: fewer)
  Residual residual = Residual::Sequential;
  bool shared_norm = false;  // parallel residual: one norm feeds attention and MLP (GPT-J, Falcon 7B)
  NormPlacement norm_placement = NormPlacement::Pre;
  QkNorm qk_norm = QkNorm::None;
  bool tied_embeddings = false;  // the head's weight is the token embedding's (GPT-2, Gemma)
  int sliding_window = 0;        // keys each query sees on window layers; 0: full causal attention
  WindowLayers window_layers = WindowLayers::All;
  int vocab = 0;
  // Megatron-LM's --make-vocab-size-divisible-by: the vocabulary is padded to a multiple of this times tp, so
  // that each rank's shard is a multiple of it (128: 50257 ids at tp 8 become shards of 6400, 16-byte aligned
  // rows for the logits GEMMs); 1: shards of ceil(vocab / tp). Padding ids hold zeros and are never a token.
  int vocab_divisible_by = 1;
  int seq_len = 0;
  int micro_batch = 0;
  DType dtype = DType::BF16;
  int tp = 1;             // tensor-parallel degree
  int gpus_per_node = 8;  // TP groups larger than this span nodes
  // Data parallelism, optimizer sharding, recomputation: set by the tools' options, never by a model file;
  // not part of the fingerprint (the schedule's ops are the same; see training_context.hpp).
  TrainingContext training;
  std::string source;     // file it was read from, for messages ("<embedded>" for built-ins)
  std::string hf_model_type;  // a Hugging Face import's model_type ("gemma2"), for the summary; else empty
  // What an importer chose for the user that differs from the file (a capped sequence length): tools print
  // them; not part of the fingerprint.
  std::vector<std::string> notes;

  int head_dim() const { return head_size > 0 ? head_size : hidden / heads; }
  int attn_width() const { return heads * head_dim(); }  // columns of the attention context (all heads)
  bool gated() const { return activation == Activation::Swiglu || activation == Activation::Geglu; }
  void set_biases(bool on) { qkv_bias = proj_bias = mlp_bias = on; }
  int rotated_dims() const { return rotary_dims > 0 ? rotary_dims : head_dim(); }
  // Whether layer l attends through the sliding window.
  bool windowed(int layer) const {
    if (sliding_window <= 0) return false;
    return window_layers == WindowLayers::All || (layer % 2 == 0) == (window_layers == WindowLayers::Even);
  }
  int heads_per_rank() const { return heads / tp; }
  // KV heads each rank holds: kv_heads/tp, or 1 (replicated) when tp is a multiple of kv_heads.
  int kv_heads_per_rank() const { return kv_heads >= tp ? kv_heads / tp : 1; }
  int ffn_per_rank() const { return ffn_hidden / tp; }
  // Vocabulary rows of the token embedding and columns of the head each rank holds (Megatron's
  // vocab-parallel layers): ceil(vocab / (vocab_divisible_by x tp)) x vocab_divisible_by; the ids from vocab
  // on are padding, at the end of the last shard(s).
  int vocab_per_rank() const { return int(vocab_shard_width(vocab, tp, vocab_divisible_by)); }
  int64_t tokens() const { return int64_t(micro_batch) * seq_len; }
};

// Everything derived from a ModelSpec, computed only by derive_facts().
struct ModelFacts {
  int64_t params_per_layer = 0;   // whole layer, all ranks together
  int64_t embedding_params = 0;   // token embedding (positional embedding for GPT included)
  int64_t head_params = 0;        // final norm + output projection (untied)
  int64_t total_params = 0;
  int64_t params_per_rank = 0;    // layers, token embedding and head sharded by tp; positions, norms replicated
  double train_flops_per_token = 0;  // forward + backward, GEMMs and attention, whole model
  int64_t allreduce_bytes = 0;    // one block's AllReduce: micro_batch * seq_len * hidden * dtype bytes
  int allreduces_per_layer = 4;   // 2 forward (attention, MLP), 2 backward
};

ModelFacts derive_facts(const ModelSpec& m);

// Checks every constraint (positive sizes, divisibility by heads and tp, ...); throws BadInput naming the key.
void validate_model(const ModelSpec& m);

// Human-readable summary: the spec, per-rank shapes and the derived facts.
std::string model_summary(const ModelSpec& m);

// Stable hash of everything that changes the schedule (not the name): plans record it.
std::string model_fingerprint(const ModelSpec& m);

// Overrides every tool accepts on the command line (--tp, --seq-len, --micro-batch).
struct ModelOverrides {
  std::optional<int> tp;
  std::optional<int> seq_len;
  std::optional<int> micro_batch;
};

// Loads a model YAML (configs/models) or a Hugging Face config.json, applies overrides, validates.
// A name without a path separator or extension is looked up in configs/models/.
ModelSpec load_model(const std::string& path_or_name, const ModelOverrides& overrides = {});
// The same for a file's content already in memory: `path` names it in messages and, by its suffix, decides
// as load_model does whether JSON text is a Hugging Face config.
ModelSpec load_model_string(const std::string& text, const std::string& path, const ModelOverrides& overrides = {});

// The embedded default model: the CPU-sized GPT-style model the main job runs.
ModelSpec default_model();

}  // namespace domino
