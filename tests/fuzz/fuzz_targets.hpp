// fuzz_targets.hpp: the loaders a user's file reaches, one feed function per fuzz target, and the contract
// every target checks: a loader answers bad input with a domino::Error of kind BadInput, nothing else.
// The same feeds run under libFuzzer (tests/fuzz/*_fuzz.cpp built with DOMINO_FUZZ) and in the regression
// test over tests/data/fuzz/<target>/ (fuzz_regression_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/base/error.hpp"

namespace domino::fuzz {

// Each feed hands `input` to one loader as the content of a user's file (in memory: no temp file).
void feed_model(const std::string& input);      // model YAML (or JSON) as load_model reads a file
void feed_hf(const std::string& input);         // Hugging Face config.json
void feed_plan(const std::string& input);       // plan YAML against a fixed model
void feed_profile(const std::string& input);    // hardware profile YAML
void feed_trace(const std::string& input);      // Chrome trace as domino-compare reads it
void feed_calibrate(const std::string& input);  // Chrome trace calibrating a fixed profile
void feed_npy(const std::string& input);        // .npy tensor dump

// Runs one input through a feed. BadInput is the expected answer to bad input and is swallowed; any other
// exception (a Runtime Error, std::out_of_range, YAML::Exception, a JSON exception, std::bad_alloc...)
// escapes, and libFuzzer reports the abort as a crash.
inline void run_input(void (*feed)(const std::string&), const uint8_t* data, size_t size) {
  try {
    feed(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::BadInput) throw;
  }
}

}  // namespace domino::fuzz

// The libFuzzer entry point of a target file; compiled only into the fuzz executables.
#ifdef DOMINO_FUZZ_ENTRY
#define DOMINO_FUZZ_TARGET(feed)                                               \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {    \
    domino::fuzz::run_input(&domino::fuzz::feed, data, size);                  \
    return 0;                                                                  \
  }
#else
#define DOMINO_FUZZ_TARGET(feed)
#endif
