// built_backends.hpp: what the tools register beyond the CPU backend, decided once by this build: the CUDA
// backend (with its own flags where a tool offers them) when it was built, else a clear refusal of
// --backend cuda. Shared by the domino-exec and domino-profile mains.
#pragma once

#include <CLI/CLI.hpp>

#include "executor/job/backends.hpp"

#ifdef DOMINO_HAVE_CUDA
#include "executor/cuda/cuda_backend.hpp"
#endif

namespace domino {

// flags: the tool's command line, to which the CUDA backend adds its flags (in their own group,
// backend_flag_group("cuda"), so that a run on another backend refuses them); null: default CUDA options.
inline void register_built_backends(CLI::App* flags) {
#ifdef DOMINO_HAVE_CUDA
  if (flags)
    register_backend("cuda", add_cuda_backend_flags(*flags->add_option_group(backend_flag_group("cuda"))));
  else register_backend("cuda", [] { return make_cuda_backend(CudaOptions{}); });
#else
  (void)flags;
  register_missing_backend("cuda", "this build has no CUDA backend (configure with -DDOMINO_CUDA=ON on a machine "
                                   "with the CUDA toolkit)");
#endif
}

}  // namespace domino
