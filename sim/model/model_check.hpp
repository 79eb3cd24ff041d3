// model_check.hpp: model-input internals shared by validate_model, the YAML loader and the HF importer.
// Validation reports the violated key separately from the message, so each front end can locate it
// (file:line:column in YAML, the JSON key in config.json, or the command-line override that set it).
#pragma once

#include <optional>
#include <string>

#include "sim/model/model_spec.hpp"

namespace domino {

struct ModelViolation {
  std::string key;      // the key whose value breaks the rule (e.g. "tp")
  std::string message;  // what is wrong and the rule, without location
};

// The first violated constraint of `m`, or nullopt when the model is valid.
std::optional<ModelViolation> check_model(const ModelSpec& m);

// "--tp 3" when `key` was set by a command-line override, "" otherwise.
std::string override_flag(const std::string& key, const ModelOverrides& overrides);

// Applies the overrides to `m` (tp, seq_len, micro_batch).
void apply_overrides(ModelSpec& m, const ModelOverrides& overrides);

}  // namespace domino
