// profile_run.hpp: domino-profile's two jobs: measure this machine into a profile, and calibrate a profile
// on a measured trace. main() parses the command line into ProfileOptions and calls these.
#pragma once

#include <optional>
#include <string>

#include "executor/runtime/cpu_placement.hpp"

namespace domino::prof {

struct ProfileOptions {
  std::string backend = "cpu";  // a name make_backend knows (executor/job/backends.hpp)
  int tp = 2;
  bool tp_given = false;        // --tp was given: it also overrides the --for model's TP degree
  double link_gbps = 0;
  std::string for_model;        // --for MODEL
  bool quick = false;
  std::string output;           // -o
  std::string calibrate_trace;  // --calibrate TRACE
  std::string base_profile;     // --profile: the calibration base; measuring: devices per node and the
                                // inter-node link (one node's ranks cannot measure them)
  std::string fit;              // --fit: the parts a calibration may change (calibrate.hpp); empty: all
  std::string name;             // profile name (default: the output file's stem)
  int timeout_s = 900;
  // --cpu-placement: none or rank (domino-exec's names); unset: ForkOptions' default
  std::optional<CpuPlacement> placement;
  bool idle_poll = true;  // --no-idle-poll clears it: pinned ranks' CPUs may halt when idle (ForkOptions)
  bool realtime = false;  // --realtime: the ranks' threads SCHED_FIFO, communication above compute
  bool collectives_after_compute = false;  // --collectives-after-compute: GEMMs before each collective probe
  bool drift_reference = true;  // --no-drift-reference clears it: GEMM probes as timed (CPU backend)
};

// Both print a summary on stdout and write options.output atomically. Throw domino::Error. run_measure
// measures through the backend named by options.backend (a main built with CUDA registers "cuda").
void run_measure(const ProfileOptions& options);
void run_calibrate(const ProfileOptions& options);

}  // namespace domino::prof
