// profile_fuzz.cpp: fuzz target "profile": a hardware profile YAML through the strict reader; a profile it
// accepts must also pass validate_profile (the invariants the reader promises).
#include "sim/cost/profile.hpp"
#include "tests/fuzz/fuzz_targets.hpp"

namespace domino::fuzz {

void feed_profile(const std::string& input) { validate_profile(load_profile_string(input, "fuzz-profile.yaml")); }

}  // namespace domino::fuzz

DOMINO_FUZZ_TARGET(feed_profile)
