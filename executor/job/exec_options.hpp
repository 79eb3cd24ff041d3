// exec_options.hpp: everything domino-exec can be asked, parsed from the command line, and turned back into
// the argument list the launcher gives each rank process (ranks re-read the same job themselves).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/model/model_spec.hpp"

namespace domino {

struct ExecOptions {
  std::string target;    // positional: a plan file, or (with --strategy) a model name/file
  std::string model;     // --model: the model of a plan file (default: the one the plan names)
  std::string strategy;  // --strategy: run a named strategy instead of a plan file
  ModelOverrides overrides;
  int ranks = 0;  // 0: the TP degree
  int iters = 5;
  int warmup = 2;
  uint64_t seed = 1;
  std::string optimizer = "adam";  // adam | sgd
  double lr = 1e-3;
  int threads = 1;
  std::string trace_path;
  std::string json_path;
  double link_gbps = 0;
  double link_latency_us = 0;
  bool force = false;
  std::string backend = "cpu";
  // CUDA backend only (see executor/cuda/cuda_backend.hpp: CudaOptions).
  bool emulate_comm = false;
  int emulate_tp = 8;
  int emulate_sms = 16;
  double emulate_busbw_gbps = 370;
  double emulate_latency_us = 10;
  std::string cuda_dtype = "model";
  bool check = false;
  std::string dump_dir;
  int dump_iter = 0;
  bool nan_check = true;
  int timeout_s = 30;
  bool quiet = false;  // no per-iteration loss lines (the --check runs)

  // Hidden: set by the launcher for the rank processes it starts.
  bool rank_worker = false;
  std::string run_dir;        // the launch's temp folder (FileStore in run_dir/store)
  std::string bind_address;   // Gloo's TCP device address (an emulated link's namespace address)
  std::string snapshot_path;  // --check: where this rank writes its buffers after the run ("{rank}" expands)
};

// Parses argv (argv[0] is the program); returns false after printing help/version (exit 0).
// Throws domino::Error (BadInput) on bad usage.
bool parse_exec_options(int argc, const char* const* argv, ExecOptions* out);

// The arguments (without the program) that make a rank process run `o`.
std::vector<std::string> worker_arguments(const ExecOptions& o);

// Turns relative output/input paths into absolute ones (rank processes may start elsewhere).
void make_paths_absolute(ExecOptions* o);

}  // namespace domino
