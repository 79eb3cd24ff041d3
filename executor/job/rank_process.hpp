// rank_process.hpp: the body of one rank process: join the group, prepare the backend, run the iterations,
// report. Started by the launcher (--rank-worker) or, in env mode, by an outside launcher such as torchrun
// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); rank 0 gathers every rank's report through the rendezvous
// store and writes the trace and the summary.
#pragma once

#include "executor/job/exec_options.hpp"

namespace domino {

// True when RANK and WORLD_SIZE are set (this process is one rank of an outside launch).
bool env_mode();

// Runs this process's rank; throws domino::Error naming the rank on failure.
void run_rank_process(const ExecOptions& options);

}  // namespace domino
