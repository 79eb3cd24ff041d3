// cuda_check.cpp: error messages of the CUDA, cuBLAS and NCCL check macros.
#include "executor/runtime/check.hpp"

#include <cublas_api.h>
#include <cuda_runtime.h>
#include <nccl.h>

namespace domino::cuda {

static std::string where(const char* call, const char* file, int line) {
  return std::string(call) + " at " + file + ":" + std::to_string(line);
}

void fail_cuda(int code, const char* call, const char* file, int line) {
  throw_runtime("CUDA error " + std::to_string(code) + " (" +
                cudaGetErrorString(static_cast<cudaError_t>(code)) + ") in " + where(call, file, line));
}

void fail_cublas(int code, const char* call, const char* file, int line) {
  throw_runtime("cuBLAS error " + std::to_string(code) + " (" +
                cublasGetStatusString(static_cast<cublasStatus_t>(code)) + ") in " + where(call, file, line));
}

void fail_nccl(int code, const char* call, const char* file, int line) {
  throw_runtime("NCCL error " + std::to_string(code) + " (" + ncclGetErrorString(static_cast<ncclResult_t>(code)) +
                ") in " + where(call, file, line));
}

void check_launch(const char* kernel, const char* file, int line) {
  const cudaError_t rc = cudaGetLastError();
  if (rc != cudaSuccess) fail_cuda(static_cast<int>(rc), kernel, file, line);
}

}  // namespace domino::cuda
