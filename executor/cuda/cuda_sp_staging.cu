// cuda_sp_staging.cu: the copies around a sequence-parallel AllGather or ReduceScatter (see SpRowMap in
// cuda_kernels.hpp): NCCL exchanges one contiguous array, rank block after rank block, while the rows of a
// group live spread over a strided region. One thread per element; the staging keeps the view's type.
#include "executor/cuda/cuda_common.cuh"

namespace domino::cuda {
namespace {

// The region row staged row d maps to.
__device__ __forceinline__ int64_t region_row(const SpRowMap& m, int64_t d) {
  const int64_t rank = d / m.local_rows, t = d % m.local_rows;
  const int64_t per_batch = m.groups * m.part, in_batch = t % per_batch;
  return (t / per_batch) * m.groups * m.group_rows + (in_batch / m.part) * m.group_rows + rank * m.part +
         in_batch % m.part;
}

template <typename T>
__global__ void to_staging_kernel(View<T> v, SpRowMap m, T* staging) {
  const int64_t n = m.ranks * m.local_rows * v.ncols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    staging[i] = v.row(region_row(m, i / v.ncols))[i % v.ncols];
}

template <typename T>
__global__ void from_staging_kernel(const T* staging, SpRowMap m, View<T> v, bool accumulate) {
  const int64_t n = m.ranks * m.local_rows * v.ncols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    T* p = v.row(region_row(m, i / v.ncols)) + i % v.ncols;
    *p = accumulate ? from_f<T>(to_f(*p) + to_f(staging[i])) : staging[i];
  }
}

}  // namespace

void sp_to_staging(const DevView& v, const SpRowMap& map, void* staging, StreamHandle s) {
  const int64_t n = map.ranks * map.local_rows * v.ncols;
  if (n == 0) return;
  DOMINO_DISPATCH_ELT(v.elt, to_staging_kernel<T><<<grid_for(n), 256, 0, stream_of(s)>>>(view_of<T>(v), map,
                                                                                         static_cast<T*>(staging)));
  DOMINO_CUDA_LAUNCHED("sp to_staging_kernel");
}

void sp_from_staging(const void* staging, const SpRowMap& map, const DevView& v, bool accumulate, StreamHandle s) {
  const int64_t n = map.ranks * map.local_rows * v.ncols;
  if (n == 0) return;
  DOMINO_DISPATCH_ELT(v.elt, from_staging_kernel<T><<<grid_for(n), 256, 0, stream_of(s)>>>(
                                 static_cast<const T*>(staging), map, view_of<T>(v), accumulate));
  DOMINO_CUDA_LAUNCHED("sp from_staging_kernel");
}

}  // namespace domino::cuda
