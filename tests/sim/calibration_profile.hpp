// calibration_profile.hpp: the small CPU-like profile the calibration tests fit against: fp32 GEMMs,
// memory, attention and an intra-node link, no tables and no interference. The round-trip test uses it as
// the truth; the calibrate fuzz target adds tables, an inter-node link and interference on top.
#pragma once

#include <string>

#include "sim/cost/profile.hpp"

namespace domino::test {

inline Profile calibration_profile(const std::string& name) {
  Profile p;
  p.name = name;
  p.devices_per_node = 4;
  GemmProfile g;
  g.peak_tflops = 0.08;
  g.efficiency = {{0.001, 0.4}, {0.01, 0.6}, {0.1, 0.75}, {1, 0.85}};
  p.gemm[int(DType::FP32)] = g;
  p.memory = {10.0, 4.0, {}};
  p.attention.efficiency = {{0.001, 0.2}, {0.1, 0.4}};
  p.intra_node = {60.0, 1.2, {}, 0};
  p.interference = {0.0, 0.0};
  return p;
}

}  // namespace domino::test
