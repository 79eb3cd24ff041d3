// launcher.hpp: domino-exec's top level on one machine: starts one process per rank (this same binary with
// the hidden --rank-worker flag, inside an emulated link's namespaces with --link-gbps), waits for all of
// them, and stops the others within seconds when one dies. Children die with the launcher
// (PR_SET_PDEATHSIG), so no rank outlives it.
#pragma once

#include "executor/job/exec_options.hpp"

namespace domino {

// Everything domino-exec does when it is not a rank process: validate, launch (or --check). Returns the
// exit code (0 ok); throws domino::Error for bad input and for a failed rank (naming it and how it died).
int run_exec(const ExecOptions& options);

// Runs one launch of `ranks` rank processes for `options` and waits; throws domino::Error naming the first
// rank that failed (killed by a signal, or a non-zero exit).
void launch_ranks(const ExecOptions& options, int ranks);

}  // namespace domino
