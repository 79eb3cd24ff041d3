// calibrate_fuzz.cpp: fuzz target "calibrate": a measured trace read and fitted as domino-profile
// --calibrate does, against a fixed profile. The profile has figures for one dtype only, so the fit never
// looks up the model the trace names (which would read files the input chooses).
#include "sim/fit/calibrate.hpp"
#include "tests/fuzz/fuzz_targets.hpp"

namespace domino::fuzz {

namespace {

Profile calibration_base() {
  Profile p;
  p.name = "fuzz-base";
  p.devices_per_node = 4;
  GemmProfile g;
  g.peak_tflops = 0.08;
  g.efficiency = {{0.001, 0.4}, {0.01, 0.6}, {0.1, 0.75}, {1, 0.85}};
  g.table = {{64, 64, 64, 3.0}, {256, 384, 128, 9.0}};
  p.gemm[int(DType::FP32)] = g;
  p.memory = {10.0, 4.0, {}};
  p.attention.efficiency = {{0.001, 0.2}, {0.1, 0.4}};
  p.intra_node = {60.0, 1.2, {{1024, 5.0}, {1 << 20, 40.0}}, 0};
  p.inter_node = CollectiveProfile{10.0, 8.0, {}, 2.0};
  p.interference = {0.1, 0.2};
  return p;
}

}  // namespace

void feed_calibrate(const std::string& input) {
  static const Profile base = calibration_base();
  const TraceFile trace = read_trace_string(input, "fuzz-measured.json");
  prof::calibrate_profile(base, trace);
}

}  // namespace domino::fuzz

DOMINO_FUZZ_TARGET(feed_calibrate)
