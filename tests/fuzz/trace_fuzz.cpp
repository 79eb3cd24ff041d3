// trace_fuzz.cpp: fuzz target "trace": a Chrome trace read as domino-compare reads its two inputs.
#include "sim/trace/timeline.hpp"
#include "tests/fuzz/fuzz_targets.hpp"

namespace domino::fuzz {

void feed_trace(const std::string& input) { read_trace_string(input, "fuzz-trace.json"); }

}  // namespace domino::fuzz

DOMINO_FUZZ_TARGET(feed_trace)
