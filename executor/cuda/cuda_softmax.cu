// cuda_softmax.cu: the causal (optionally sliding-window) softmax of attention (forward and backward).
#include "executor/cuda/cuda_common.cuh"

namespace domino::cuda {
namespace {

// One warp per (query row, head).
template <typename T>
__global__ void softmax_fwd_kernel(View<T> p, int heads, int64_t key_stride, int64_t nk, int64_t window, float scale) {
  const int64_t warp = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= p.rows() * heads) return;
  const int64_t r = warp / heads;
  const int h = static_cast<int>(warp % heads);
  T* row = p.row(r) + h * key_stride;
  const int64_t last = min(p.pos(r) + 1, nk);  // keys [first, last) are visible
  const int64_t first = window > 0 ? max(int64_t(0), p.pos(r) - window + 1) : 0;
  float mx = -INFINITY;
  for (int64_t k = first + lane; k < last; k += 32) mx = fmaxf(mx, to_f(row[k]) * scale);
  mx = warp_max(mx);
  float sum = 0;
  for (int64_t k = first + lane; k < last; k += 32) sum += __expf(to_f(row[k]) * scale - mx);
  sum = warp_sum(sum);
  const float inv = 1.f / sum;
  for (int64_t k = lane; k < key_stride; k += 32) {
    row[k] = from_f<T>(k >= first && k < last ? __expf(to_f(row[k]) * scale - mx) * inv : 0.f);
  }
}

template <typename T>
__global__ void softmax_bwd_kernel(View<T> p, View<T> dp, int heads, int64_t key_stride, int64_t nk, int64_t window,
                                   float scale) {
  const int64_t warp = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= p.rows() * heads) return;
  const int64_t r = warp / heads;
  const int h = static_cast<int>(warp % heads);
  const T* pr = p.row(r) + h * key_stride;
  T* dr = dp.row(r) + h * key_stride;
  const int64_t last = min(p.pos(r) + 1, nk);
  const int64_t first = window > 0 ? max(int64_t(0), p.pos(r) - window + 1) : 0;
  float dot = 0;
  for (int64_t k = first + lane; k < last; k += 32) dot += to_f(pr[k]) * to_f(dr[k]);
  dot = warp_sum(dot);
  for (int64_t k = lane; k < key_stride; k += 32) {
    dr[k] = from_f<T>(k >= first && k < last ? to_f(pr[k]) * (to_f(dr[k]) - dot) * scale : 0.f);
  }
}

}  // namespace

void causal_softmax_fwd(const DevView& p, const SoftmaxShape& shape, StreamHandle s) {
  const int64_t threads = p.rows() * shape.heads * 32;
  DOMINO_DISPATCH_ELT(p.elt, softmax_fwd_kernel<T><<<unsigned((threads + 255) / 256), 256, 0, stream_of(s)>>>(
      view_of<T>(p), shape.heads, shape.key_stride, shape.nk, shape.window, shape.scale));
  DOMINO_CUDA_LAUNCHED("softmax_fwd_kernel");
}

void causal_softmax_bwd(const DevView& p, const DevView& dp, const SoftmaxShape& shape, StreamHandle s) {
  const int64_t threads = p.rows() * shape.heads * 32;
  DOMINO_DISPATCH_ELT(p.elt, softmax_bwd_kernel<T><<<unsigned((threads + 255) / 256), 256, 0, stream_of(s)>>>(
      view_of<T>(p), view_of<T>(dp), shape.heads, shape.key_stride, shape.nk, shape.window, shape.scale));
  DOMINO_CUDA_LAUNCHED("softmax_bwd_kernel");
}

}  // namespace domino::cuda
