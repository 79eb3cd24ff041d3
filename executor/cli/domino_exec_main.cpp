// domino-exec: runs a plan's tensor-parallel training for real. Without an outside launcher's rank variables
// it is the launcher (one forked process per rank); in env mode (torchrun, srun, mpirun: launch_env.hpp)
// this process is one rank. An interrupted launch ends the process by the interrupting signal.
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "executor/cli/built_backends.hpp"
#include "executor/job/exec_options.hpp"
#include "executor/job/launcher.hpp"
#include "executor/job/rank_process.hpp"
#include "executor/runtime/rank_launcher.hpp"
#include "sim/base/error.hpp"

int main(int argc, char** argv) {
  bool rank = false;
  const int rc = domino::run_main("domino-exec", [&] {
    domino::ExecOptions options;
    const auto backend_flags = [](CLI::App& app) { domino::register_built_backends(&app); };
    if (!domino::parse_exec_options(argc, argv, &options, backend_flags)) return 0;
    rank = domino::env_mode();
#ifndef _OPENMP
    // Eigen parallelises a GEMM only through OpenMP, which this build does not link.
    if (options.run.threads > 1 && !rank)
      std::fprintf(stderr, "domino-exec: warning: --threads %d has no effect: built without OpenMP\n", options.run.threads);
#endif
    if (!rank) return domino::run_exec(options);
    if (options.run.check) domino::throw_bad_input("--check runs its own launches: not available in env mode");
    if (options.run.link_gbps > 0) domino::throw_bad_input("--link-gbps needs the built-in launcher (not env mode)");
    domino::run_rank_process(options);
    return 0;
  });
  // Stopped by Ctrl-C or SIGTERM once the ranks were cleaned up: end by that signal, as the shell expects
  // (exit status 130 for SIGINT, 143 for SIGTERM).
  if (const int sig = domino::launch_interrupted_by()) {
    std::fflush(stdout);
    std::fflush(stderr);
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
  if (rank) {
    // A rank that failed may still have a worker thread blocked inside a collective: leave without
    // running destructors (the outside launcher stops the other ranks).
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(rc);
  }
  return rc;
}
