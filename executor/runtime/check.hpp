// check.hpp: the check macros every call into a communication or device library goes through, so that a
// failure surfaces as a domino::Error (runtime) naming what was running (op id) and the rank.
// Gloo: DOMINO_GLOO_CHECK. CUDA backend: DOMINO_CUDA_CHECK, DOMINO_CUBLAS_CHECK, DOMINO_NCCL_CHECK and
// DOMINO_CUDA_LAUNCHED (declared here without CUDA headers; defined in executor/cuda/cuda_check.cpp).
#pragma once

#include <gloo/common/error.h>
#include <gloo/common/logging.h>

#include <string>

#include "sim/base/error.hpp"

namespace domino::detail {

[[noreturn]] inline void throw_gloo_failure(const std::string& what, int rank, const char* message,
                                            const char* file, int line) {
  throw_peer_lost("rank " + std::to_string(rank) + ": " + what + ": Gloo failed: " + message + " (" + file + ":" +
                std::to_string(line) + "); a peer rank probably died or timed out");
}

}  // namespace domino::detail

// Runs `expr`; a Gloo exception becomes domino::Error naming `context_text` (e.g. the op id) and the rank.
#define DOMINO_GLOO_CHECK(expr, context_text, rank_value)                                                     \
  do {                                                                                          \
    try {                                                                                       \
      expr;                                                                                     \
    } catch (const ::gloo::Exception& gloo_error_) {                                            \
      ::domino::detail::throw_gloo_failure((context_text), (rank_value), gloo_error_.what(), __FILE__, __LINE__); \
    } catch (const ::gloo::EnforceNotMet& gloo_error_) {                                        \
      ::domino::detail::throw_gloo_failure((context_text), (rank_value), gloo_error_.what(), __FILE__, __LINE__); \
    }                                                                                           \
  } while (0)

namespace domino::cuda {

[[noreturn]] void fail_cuda(int code, const char* call, const char* file, int line);
[[noreturn]] void fail_cublas(int code, const char* call, const char* file, int line);
[[noreturn]] void fail_nccl(int code, const char* call, const char* file, int line);
// After a kernel launch: turns a pending launch error into an Error naming the kernel.
void check_launch(const char* kernel, const char* file, int line);

}  // namespace domino::cuda

#define DOMINO_CUDA_CHECK(call)                                                                   \
  do {                                                                                            \
    const auto domino_rc_ = (call);                                                               \
    if (domino_rc_ != 0) ::domino::cuda::fail_cuda(static_cast<int>(domino_rc_), #call, __FILE__, __LINE__); \
  } while (0)
#define DOMINO_CUBLAS_CHECK(call)                                                                 \
  do {                                                                                            \
    const auto domino_rc_ = (call);                                                               \
    if (domino_rc_ != 0) ::domino::cuda::fail_cublas(static_cast<int>(domino_rc_), #call, __FILE__, __LINE__); \
  } while (0)
#define DOMINO_NCCL_CHECK(call)                                                                   \
  do {                                                                                            \
    const auto domino_rc_ = (call);                                                               \
    if (domino_rc_ != 0) ::domino::cuda::fail_nccl(static_cast<int>(domino_rc_), #call, __FILE__, __LINE__); \
  } while (0)
#define DOMINO_CUDA_LAUNCHED(kernel) ::domino::cuda::check_launch(kernel, __FILE__, __LINE__)
