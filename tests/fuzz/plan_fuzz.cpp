// plan_fuzz.cpp: fuzz target "plan": a plan file read against the fixed model the plans in tests/data/plans
// are written for. Forced first (the model check skipped, so that every layer entry is read and validated),
// then, when that is accepted, unforced (the model name, fingerprint and TP degree compared).
#include "sim/model/plan.hpp"
#include "tests/fuzz/fuzz_targets.hpp"

namespace domino::fuzz {

namespace {

// tests/sim/plan_test.cpp's model: micro-batch 6, sequence 12, hidden 42 (so p = 4 or q = 4 do not divide).
ModelSpec plan_model() {
  ModelSpec m;
  m.name = "tiny-bad";
  m.family = Family::Gpt;
  m.layers = 3;
  m.hidden = 42;
  m.heads = 6;
  m.kv_heads = 6;
  m.ffn_hidden = 84;
  m.vocab = 40;
  m.seq_len = 12;
  m.micro_batch = 6;
  m.tp = 2;
  m.source = "<fuzz>";
  return m;
}

}  // namespace

void feed_plan(const std::string& input) {
  static const ModelSpec model = plan_model();
  load_plan_string(input, "fuzz-plan.yaml", model, /*force=*/true);
  load_plan_string(input, "fuzz-plan.yaml", model, /*force=*/false);
}

}  // namespace domino::fuzz

DOMINO_FUZZ_TARGET(feed_plan)
