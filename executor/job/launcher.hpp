// launcher.hpp: domino-exec's top level on one machine: resolves the job, then starts one rank process per
// rank through the one rank launcher (executor/runtime/rank_launcher.hpp: forked, inside an emulated link's
// namespaces with --link-gbps, stopped together on the first failure), or runs --check.
#pragma once

#include <functional>
#include <string>

#include "executor/job/exec_options.hpp"
#include "executor/job/job.hpp"
#include "executor/runtime/gloo_comm.hpp"

namespace domino {

// Everything domino-exec does when it is not a rank of an outside launch: validate, launch (or --check).
// Returns the exit code (0 ok); throws domino::Error for bad input and for a failed rank (naming it and how
// it died).
int run_exec(const ExecOptions& options);

// A rank's body: the options as this rank holds them (its cores set: rank_placement.hpp) and its group.
using RankBodyWithOptions = std::function<void(const ExecOptions& placed, const CommConfig& comm)>;

// Forks `ranks` rank processes (inside the emulated link with --link-gbps), places each on the host's cores
// (--cpu-placement) and runs body in each with the rank's group configuration; waits. Throws domino::Error
// naming the first rank that failed.
void launch_rank_bodies(const ExecOptions& options, int ranks, const RankBodyWithOptions& body);

// Runs `job` once on job.ranks forked rank processes and waits. With snapshot_pattern set, every rank writes
// its buffers after the run to the pattern with "{rank}" replaced by its rank (--check). Throws
// domino::Error naming the first rank that failed.
void launch_job(const ExecOptions& options, const Job& job, const std::string& snapshot_pattern = "");

}  // namespace domino
