// hf_import.hpp: reads a Hugging Face config.json of a dense decoder family (docs/hf-import.md lists them and
// every key read) as a model description; micro-batch and TP, and the sequence length when given, come from
// the command-line overrides.
#pragma once

#include <string>

#include "sim/model/model_spec.hpp"

namespace domino {

// `text` is the file's content, `path` names it in messages. Applies the overrides and validates.
ModelSpec import_hf_config(const std::string& text, const std::string& path, const ModelOverrides& overrides);

// True when `text` is a JSON object that is not a Domino model written in JSON syntax (no "family" key
// without "model_type"): such files go to import_hf_config.
bool looks_like_hf_config(const std::string& text);

}  // namespace domino
