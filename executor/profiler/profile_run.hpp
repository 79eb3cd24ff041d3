// profile_run.hpp: domino-profile's two jobs: measure this machine into a profile, and calibrate a profile
// on a measured trace. main() parses the command line into ProfileOptions and calls these.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "executor/profiler/profile_workload.hpp"

namespace domino::prof {

struct ProfileOptions {
  std::string backend = "cpu";  // cpu | cuda
  int tp = 2;
  bool tp_given = false;        // --tp was given: it also overrides the --for model's TP degree
  double link_gbps = 0;
  std::string for_model;        // --for MODEL
  bool quick = false;
  std::string output;           // -o
  std::string calibrate_trace;  // --calibrate TRACE
  std::string base_profile;     // --profile (calibration base; CUDA: where collectives come from)
  std::string fit;              // --fit: the parts a calibration may change (calibrate.hpp); empty: all
  std::string name;             // profile name (default: the output file's stem)
  int timeout_s = 900;
};

// The CUDA backend's compute measurement (executor/profiler/cuda_profile.hpp), given by main() when built.
using ComputeMeasurer = std::function<nlohmann::json(const Workload&, bool quick)>;

// Both print a summary on stdout and write options.output atomically. Throw domino::Error.
void run_measure(const ProfileOptions& options, const ComputeMeasurer& cuda_measurer);
void run_calibrate(const ProfileOptions& options);

}  // namespace domino::prof
