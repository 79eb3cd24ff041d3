// calibrate_fuzz.cpp: fuzz target "calibrate": a measured trace read and fitted as domino-profile
// --calibrate does, against a fixed profile. The profile has figures for one dtype only, so the fit never
// looks up the model the trace names (which would read files the input chooses).
#include "sim/fit/calibrate.hpp"
#include "tests/sim/calibration_profile.hpp"
#include "tests/fuzz/fuzz_targets.hpp"

namespace domino::fuzz {

namespace {

// The calibration tests' profile, with a GEMM table, a bus-bandwidth table, an inter-node link and
// interference, which the round-trip truth leaves out.
Profile calibration_base() {
  Profile p = test::calibration_profile("fuzz-base");
  p.gemm[int(DType::FP32)]->table = {{64, 64, 64, 3.0}, {256, 384, 128, 9.0}};
  p.intra_node.table = {{1024, 5.0}, {1 << 20, 40.0}};
  p.inter_node = CollectiveProfile{10.0, 8.0, {}, 2.0};
  p.interference = {0.1, 0.2};
  return p;
}

}  // namespace

void feed_calibrate(const std::string& input) {
  static const Profile base = calibration_base();
  const TraceFile trace = read_trace_string(input, "fuzz-measured.json");
  prof::calibrate_profile(base, trace);
  // The parts only named ones fit: the transfers over every timed iteration, the stall to the mean iteration.
  static const prof::CalibrationScope named = prof::parse_calibration_scope("transfer,stall");
  prof::calibrate_profile(base, trace, 0, named);
}

}  // namespace domino::fuzz

DOMINO_FUZZ_TARGET(feed_calibrate)
