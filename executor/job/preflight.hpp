// preflight.hpp: domino-exec's check, before any rank starts, that the job fits the host it runs on, so that a
// plan too big fails in a second with what it needs and what is there, not minutes later with a rank killed
// by the kernel's OOM killer or a run whose times are meaningless.
//
// What is refused (BadInput, exit 2):
//  - memory: in every pool the ranks allocate from (this machine's memory, or one CUDA device each), the
//    ranks drawing on it x what one rank allocates (Backend::host_footprint) is more than is free there;
//  - cores: more ranks on this host than CPUs this process may run on (its affinity mask): a rank's
//    compute and its collectives then wait for a core, peers time out, and every time is wrong.
// What is only a warning: ranks x math threads (--threads) more than those CPUs; the threads time-share
// cores, which slows the run down but leaves it correct.
// Env mode (one process per rank, started by torchrun/srun/mpirun) checks its own rank's pools, with the
// launcher's count of ranks on this host when it gives one; a rank the launcher bound to some cores
// (srun --cpu-bind) checks only itself against those. --no-preflight skips every check.
#pragma once

#include <string>
#include <vector>

#include "executor/job/exec_options.hpp"
#include "executor/job/job.hpp"
#include "executor/job/launch_env.hpp"
#include "executor/runtime/backend.hpp"

namespace domino {

// What the check compares: the job's ranks on this host and what the host offers them.
struct PreflightFacts {
  HostFootprint footprint;      // bytes per rank, busy threads per rank, the memory pools
  int ranks_on_cores = 1;       // ranks that share the CPUs below
  int cpus = 1;                 // CPUs those ranks may run on
  std::string cpus_source;      // "this process's affinity mask"
  bool timed = true;            // false for --check: only correctness, so sharing cores is no error
};

struct PreflightVerdict {
  std::vector<std::string> refusals;  // each says what the job needs and what the host has
  std::vector<std::string> warnings;
};

// The judgement alone, on given facts (no system is asked).
PreflightVerdict judge_preflight(const PreflightFacts& facts);

// The host's ranks of a launch by the built-in launcher: 0..ranks-1, all started by this process.
HostRanks launcher_host_ranks(int ranks);
// The host's ranks of an outside launch: every local rank when the launcher said how many share this host,
// else this rank alone; self is this rank's local rank (its global rank when the launcher gave none, as
// the backends then choose their device by it).
HostRanks env_host_ranks(const LaunchEnv& launch);

// Gathers the facts for `jobs` on the host's `ranks` (`backend`, the run's, says what a rank takes and what is
// free; a rank holds the buffers of every job given: one job, or every plan of --plans), judges them, prints
// the warnings on stderr and throws BadInput with every refusal. Does nothing with --no-preflight.
void run_preflight(const ExecOptions& options, const Backend& backend, const std::vector<const Job*>& jobs,
                   const HostRanks& ranks);

}  // namespace domino
