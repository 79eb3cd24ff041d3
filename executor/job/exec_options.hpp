// exec_options.hpp: what domino-exec is asked, split by owner: what to run (JobRequest: resolved into a Job
// by job.hpp), how to run it (RunSettings), and which backend; each backend declares, registers and
// validates its own flags (backends.hpp). Rank processes are forked, so they get these structs as memory.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "executor/runtime/cpu_placement.hpp"
#include "sim/model/model_spec.hpp"

namespace CLI {
class App;
}

namespace domino {

// What to run: the model, the plan and the shape of the job.
struct JobRequest {
  std::string target;    // positional: a plan file, or (with --strategy) a model name/file
  std::string model;     // --model: the model of a plan file (default: the one the plan names)
  std::string strategy;  // --strategy: run a named strategy instead of a plan file
  // --plans / --plans-file: several plans of one model, interleaved in one launch (multi_plan.hpp); each
  // entry a plan file or a named strategy
  std::vector<std::string> plans;
  std::string plans_file;
  ModelOverrides overrides;
  int ranks = 0;  // 0: the TP degree
  bool force = false;
};

// What domino-exec does when not told: measured on the development machine (docs/fidelity.md, "Lowering the
// noise floor"; the placement's default is in cpu_placement.hpp, shared with domino-profile).
inline constexpr WorkerWait kDefaultWait = WorkerWait::Block;
inline constexpr bool kDefaultRealtime = false;

// How to run it: iterations, training settings, outputs, the link, failure handling.
struct RunSettings {
  int iters = 5;
  int warmup = 2;
  // --plans: untimed iterations of a plan right before each of its timed ones, so that the timed one follows
  // its own plan's iteration, as in training, not another plan's.
  int visit_warmup = 0;
  uint64_t seed = 1;
  std::string optimizer = "adam";  // adam | sgd
  double lr = 1e-3;
  double weight_decay = 0.01;  // AdamW's decoupled decay (SGD: L2), on weight matrices and embeddings only
  int threads = 1;
  std::string trace_path;
  bool trace_iterations = false;  // --trace-iterations: every timed iteration's spans in the trace too
  std::string json_path;
  std::string out_dir;  // --out (with --plans): DIR/<plan>.trace.json, DIR/<plan>.json, DIR/interleave.json
  double link_gbps = 0;
  double link_latency_us = 0;
  int timeout_s = 30;
  bool check = false;
  std::string dump_dir;
  int dump_iter = 0;
  bool quiet = false;      // no per-iteration loss lines (the --check runs)
  std::optional<bool> nan_check;  // --nan-check / --no-nan-check; unset: Backend::scans_for_nan_by_default()
  std::string bind_address;  // env mode: Gloo's TCP device address (default: the one that reaches MASTER_ADDR)
  bool preflight = true;     // --no-preflight: start the ranks without checking memory and cores first
  // --cpu-placement; unset: kDefaultPlacement where the affinity mask has a core per rank, else none
  std::optional<CpuPlacement> placement;
  WorkerWait wait = kDefaultWait;  // --worker-wait
  // --realtime / --no-realtime: SCHED_FIFO for the rank's threads (cpu_placement.hpp)
  bool realtime = kDefaultRealtime;
  int compute_cpu = -1;  // not a flag: set inside each rank process from the placement (rank_placement.hpp)
};

struct ExecOptions {
  JobRequest job;
  RunSettings run;
  std::string backend = "cpu";
};

// Adds a backend's own flags to the command line (the CUDA backend's, when built with it).
using BackendFlagAdder = std::function<void(CLI::App&)>;

// True when the request runs several plans in one launch (--plans or --plans-file).
inline bool runs_several_plans(const JobRequest& j) { return !j.plans.empty() || !j.plans_file.empty(); }

// Parses argv (argv[0] is the program); returns false after printing help/version (exit 0).
// Throws domino::Error (BadInput) on bad usage.
bool parse_exec_options(int argc, const char* const* argv, ExecOptions* out, const BackendFlagAdder& backend_flags = {});

// Turns relative output/input paths into absolute ones.
void make_paths_absolute(ExecOptions* o);

}  // namespace domino
