// domino-exec: runs a plan's tensor-parallel training for real. Without RANK/WORLD_SIZE it is the launcher
// (one process per rank, this same binary); with the hidden --rank-worker flag or in env mode it is a rank.
#include <cstdio>
#include <cstdlib>

#include "executor/runtime/exec_options.hpp"
#include "executor/runtime/launcher.hpp"
#include "executor/runtime/rank_process.hpp"
#include "sim/error.hpp"

// The CUDA backend registers itself here once it exists (executor/cuda/cuda_backend.hpp: make_cuda_backend()).
#if defined(DOMINO_HAVE_CUDA) && __has_include("executor/cuda/cuda_backend.hpp")
#include "executor/cuda/cuda_backend.hpp"
#define DOMINO_REGISTER_CUDA 1
#endif

int main(int argc, char** argv) {
#ifdef DOMINO_REGISTER_CUDA
  domino::register_backend("cuda", [] { return domino::make_cuda_backend(); });
#endif
  bool worker = false;
  const int rc = domino::run_main("domino-exec", [&] {
    domino::ExecOptions options;
    if (!domino::parse_exec_options(argc, argv, &options)) return 0;
    worker = options.rank_worker || domino::env_mode();
    if (worker) {
      if (!options.rank_worker && options.check)
        domino::throw_bad_input("--check runs its own launches: not available in env mode");
      if (!options.rank_worker && options.link_gbps > 0)
        domino::throw_bad_input("--link-gbps needs the built-in launcher (not env mode)");
      domino::run_rank_process(options);
      return 0;
    }
    return domino::run_exec(options);
  });
  if (worker) {
    // A rank that failed may still have a worker thread blocked inside a collective: leave without
    // running destructors (the launcher stops the other ranks).
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(rc);
  }
  return rc;
}
