// domino-exec: runs a plan's tensor-parallel training for real. Without RANK/WORLD_SIZE it is the launcher
// (one process per rank, this same binary); with the hidden --rank-worker flag or in env mode it is a rank.
#include <cstdio>
#include <cstdlib>

#include "executor/job/backends.hpp"
#include "executor/job/exec_options.hpp"
#include "executor/job/launcher.hpp"
#include "executor/job/rank_process.hpp"
#include "sim/base/error.hpp"

// The CUDA backend is registered here when domino-exec is built with it (DOMINO_HAVE_CUDA).
#ifdef DOMINO_HAVE_CUDA
#include "executor/cuda/cuda_backend.hpp"
#endif

int main(int argc, char** argv) {
  bool worker = false;
  const int rc = domino::run_main("domino-exec", [&] {
    domino::ExecOptions options;
    if (!domino::parse_exec_options(argc, argv, &options)) return 0;
#ifdef DOMINO_HAVE_CUDA
    domino::CudaOptions cuda;
    cuda.emulate_comm = options.emulate_comm;
    cuda.emulate_tp = options.emulate_tp;
    cuda.emulate_sms = options.emulate_sms;
    cuda.emulate_busbw_gbps = options.emulate_busbw_gbps;
    cuda.emulate_latency_us = options.emulate_latency_us;
    cuda.timeout_s = options.timeout_s;
    cuda.dtype = options.cuda_dtype;
    domino::register_backend("cuda", [cuda] { return domino::make_cuda_backend(cuda); });
    // A per-op NaN scan would synchronise the device after every op and serialise the streams.
    if (options.backend == "cuda") options.nan_check = false;
#else
    if (options.emulate_comm) domino::throw_bad_input("--emulate-comm needs the CUDA backend (not built here)");
#endif
    worker = options.rank_worker || domino::env_mode();
#ifndef _OPENMP
    // Eigen parallelises a GEMM only through OpenMP, which this build does not link.
    if (options.threads > 1 && !worker)
      std::fprintf(stderr, "domino-exec: warning: --threads %d has no effect: built without OpenMP\n", options.threads);
#endif
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
