// model_fuzz.cpp: fuzz target "model": a model file (Domino YAML, or JSON that load_model routes to the
// Hugging Face importer) read the way load_model reads configs/models/NAME.yaml.
#include "sim/model/model_spec.hpp"
#include "tests/fuzz/fuzz_targets.hpp"

namespace domino::fuzz {

void feed_model(const std::string& input) { load_model_string(input, "fuzz-model.yaml"); }

}  // namespace domino::fuzz

DOMINO_FUZZ_TARGET(feed_model)
