// hf_import_internal.hpp: what the Hugging Face importer's parts share: the config.json reader (typed
// accessors over every spelling real checkpoints use, messages located at the JSON key) and the entry
// points of the per-family rules (hf_families.cpp) and the attention-layout rules (hf_layers.cpp).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sim/base/error.hpp"
#include "sim/model/model_spec.hpp"

namespace domino::hf {

using Spellings = std::vector<std::string>;

// Reads the keys Domino needs. Every key it is asked about is remembered as read, so that the importer can
// refuse the keys it neither reads nor knows to be harmless (docs/hf-import.md lists both).
class Reader {
 public:
  Reader(const nlohmann::json& j, const std::string& text, const std::string& path)
      : j_(j), text_(text), path_(path) {}

  // First spelling present with a non-null value, or "".
  std::string present(const Spellings& keys) const;
  SourceLoc where(const std::string& key) const;  // the key's line and column, else the file's start
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
  [[noreturn]] void fail_file(const std::string& message) const;  // no key to point at

  std::optional<int> opt_int(const Spellings& keys) const;
  int get_int(const Spellings& keys) const;
  std::optional<std::string> opt_string(const Spellings& keys) const;
  std::optional<bool> opt_bool(const std::string& key) const;
  std::optional<double> opt_number(const std::string& key) const;
  // Whether `key` is in the file at all, null included (a null can differ from the family's default).
  bool has(const std::string& key) const;
  // The raw value of `key` (arrays such as attention_types); nullptr when absent or null.
  const nlohmann::json* value(const std::string& key) const;

  // Keys of the file never asked about, with a non-null value, in key order.
  std::vector<std::string> unread_keys() const;
  const std::string& path() const { return path_; }

 private:
  void mark(const Spellings& keys) const { read_.insert(keys.begin(), keys.end()); }

  const nlohmann::json& j_;
  const std::string& text_;
  const std::string& path_;
  mutable std::set<std::string> read_;
};

std::string join(const std::vector<std::string>& v, size_t from = 0);

// The model types the importer reads, in the order messages list them.
const std::vector<std::string>& supported_types();

// Refuses what the dense schedule cannot express before the family is looked up: mixture-of-experts and
// latent attention (any model type), and the known families we do not model (OLMo 1's norm).
void refuse_unmodelled_architecture(const Reader& r);

// Sets every structural field of `m` the family decides from its config keys and defaults: family, norm,
// activation, head_dim, positions and rotary dims, biases, residual, norm placement, QK-norm, tied
// embeddings, KV heads, sliding window. `m` already holds hidden, heads, layers and vocab.
void apply_family(const Reader& r, const std::string& model_type, ModelSpec& m);

// Which layers attend through a window, as a layer list, folded into ModelSpec's window_layers; refuses a
// pattern that is neither all, the even nor the odd layers, naming `keys`.
void set_window_layers(const Reader& r, const std::vector<bool>& windowed, int window, const std::string& keys,
                       ModelSpec& m);

// Reads the generic `layer_types` list ("full_attention" / "sliding_attention") when the file has one.
// Returns false when absent.
bool read_layer_types(const Reader& r, int window, ModelSpec& m);

}  // namespace domino::hf
