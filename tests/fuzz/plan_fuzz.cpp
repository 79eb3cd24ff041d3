// plan_fuzz.cpp: fuzz target "plan": a plan file read against the fixed model the plans in tests/data/plans
// are written for. Forced first (the model check skipped, so that every layer entry is read and validated),
// then, when that is accepted, unforced (the model name, fingerprint and TP degree compared).
#include "sim/model/plan.hpp"
#include "tests/fuzz/fuzz_targets.hpp"
#include "tests/sim/schedule_test_util.hpp"

namespace domino::fuzz {

void feed_plan(const std::string& input) {
  static const ModelSpec model = test::plan_files_model();
  load_plan_string(input, "fuzz-plan.yaml", model, /*force=*/true);
  load_plan_string(input, "fuzz-plan.yaml", model, /*force=*/false);
}

}  // namespace domino::fuzz

DOMINO_FUZZ_TARGET(feed_plan)
