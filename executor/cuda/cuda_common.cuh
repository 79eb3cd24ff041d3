// cuda_common.cuh: device-side views, element conversion, warp reductions and dtype dispatch shared by the
// kernels.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "executor/runtime/check.hpp"
#include "executor/cuda/cuda_kernels.hpp"

namespace domino::cuda {

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
template <typename T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ float from_f<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <>
__device__ __forceinline__ __half from_f<__half>(float x) { return __float2half(x); }

// Max and sum over the 32 lanes of a warp; every lane gets the result.
__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

template <typename T>
struct View {
  T* base;
  int64_t row_stride, batch_stride, rows_per_batch, nbatch, ncols, seq0;
  __device__ __forceinline__ T* row(int64_t r) const {
    const int64_t b = r / rows_per_batch, s = r % rows_per_batch;
    return base + b * batch_stride + s * row_stride;
  }
  __device__ __forceinline__ int64_t pos(int64_t r) const { return seq0 + r % rows_per_batch; }
  __device__ __forceinline__ int64_t rows() const { return nbatch * rows_per_batch; }
};

template <typename T>
inline View<T> view_of(const DevView& v) {
  return View<T>{static_cast<T*>(v.base), v.row_stride, v.batch_stride, v.rows_per_batch, v.nbatch, v.ncols, v.seq0};
}

inline cudaStream_t stream_of(StreamHandle s) { return static_cast<cudaStream_t>(s); }

inline unsigned grid_for(int64_t n, int threads = 256) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? (blocks > 0 ? blocks : 1) : 65535 * 8);
}

}  // namespace domino::cuda

// Instantiates BODY with T bound to the element type of `elt`.
#define DOMINO_DISPATCH_ELT(elt, ...)                                               \
  switch (elt) {                                                                   \
    case ::domino::cuda::Elt::F32: { using T = float; __VA_ARGS__; break; }          \
    case ::domino::cuda::Elt::BF16: { using T = __nv_bfloat16; __VA_ARGS__; break; } \
    case ::domino::cuda::Elt::F16: { using T = __half; __VA_ARGS__; break; }         \
  }
