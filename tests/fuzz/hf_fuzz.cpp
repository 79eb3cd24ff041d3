// hf_fuzz.cpp: fuzz target "hf": a Hugging Face config.json through the importer, with command-line
// overrides (as domino-sim --model config.json --tp 2 --seq-len 128 would give them).
#include "sim/model/hf_import.hpp"
#include "tests/fuzz/fuzz_targets.hpp"

namespace domino::fuzz {

void feed_hf(const std::string& input) {
  looks_like_hf_config(input);
  ModelOverrides overrides;
  overrides.tp = 2;
  overrides.seq_len = 128;
  overrides.micro_batch = 1;
  import_hf_config(input, "fuzz/config.json", overrides);
}

}  // namespace domino::fuzz

DOMINO_FUZZ_TARGET(feed_hf)
