// cuda_softmax.cu: the causal softmax of attention (forward and backward) and the cross-entropy loss.
#include "executor/cuda/cuda_common.cuh"

namespace domino::cuda {
namespace {

__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// One warp per (query row, head).
template <typename T>
__global__ void softmax_fwd_kernel(View<T> p, int heads, int64_t key_stride, int64_t nk, float scale) {
  const int64_t warp = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= p.rows() * heads) return;
  const int64_t r = warp / heads;
  const int h = static_cast<int>(warp % heads);
  T* row = p.row(r) + h * key_stride;
  const int64_t last = min(p.pos(r) + 1, nk);  // keys [0, last) are visible
  float mx = -INFINITY;
  for (int64_t k = lane; k < last; k += 32) mx = fmaxf(mx, to_f(row[k]) * scale);
  mx = warp_max(mx);
  float sum = 0;
  for (int64_t k = lane; k < last; k += 32) sum += __expf(to_f(row[k]) * scale - mx);
  sum = warp_sum(sum);
  const float inv = 1.f / sum;
  for (int64_t k = lane; k < key_stride; k += 32) {
    row[k] = from_f<T>(k < last ? __expf(to_f(row[k]) * scale - mx) * inv : 0.f);
  }
}

template <typename T>
__global__ void softmax_bwd_kernel(View<T> p, View<T> dp, int heads, int64_t key_stride, int64_t nk, float scale) {
  const int64_t warp = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= p.rows() * heads) return;
  const int64_t r = warp / heads;
  const int h = static_cast<int>(warp % heads);
  const T* pr = p.row(r) + h * key_stride;
  T* dr = dp.row(r) + h * key_stride;
  const int64_t last = min(p.pos(r) + 1, nk);
  float dot = 0;
  for (int64_t k = lane; k < last; k += 32) dot += to_f(pr[k]) * to_f(dr[k]);
  dot = warp_sum(dot);
  for (int64_t k = lane; k < key_stride; k += 32) {
    dr[k] = from_f<T>(k < last ? to_f(pr[k]) * (to_f(dr[k]) - dot) * scale : 0.f);
  }
}

template <typename T>
__global__ void cross_entropy_kernel(View<T> logits, View<float> targets, View<T> dlogits, float inv_tokens,
                                     float* scratch) {
  const int64_t r = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= logits.rows()) return;
  const T* lr = logits.row(r);
  T* dr = dlogits.row(r);
  const int64_t v = logits.ncols;
  const int64_t target = static_cast<int64_t>(targets.row(r)[0]);
  float mx = -INFINITY;
  for (int64_t k = lane; k < v; k += 32) mx = fmaxf(mx, to_f(lr[k]));
  mx = warp_max(mx);
  float sum = 0;
  for (int64_t k = lane; k < v; k += 32) sum += __expf(to_f(lr[k]) - mx);
  sum = warp_sum(sum);
  for (int64_t k = lane; k < v; k += 32) {
    const float sm = __expf(to_f(lr[k]) - mx) / sum;
    dr[k] = from_f<T>((sm - (k == target ? 1.f : 0.f)) * inv_tokens);
  }
  if (lane == 0) atomicAdd(scratch, (logf(sum) + mx - to_f(lr[target])) * inv_tokens);
}

// The loss is stored fp32 whatever the training dtype (allocate()): bf16 would round it to steps of 0.03.
__global__ void store_loss_kernel(const float* scratch, float* loss, bool accumulate) {
  loss[0] = scratch[0] + (accumulate ? loss[0] : 0.f);
}

}  // namespace

void causal_softmax_fwd(const DevView& p, const SoftmaxShape& shape, StreamHandle s) {
  const int64_t threads = p.rows() * shape.heads * 32;
  DOMINO_DISPATCH_ELT(p.elt, softmax_fwd_kernel<T><<<unsigned((threads + 255) / 256), 256, 0, stream_of(s)>>>(
      view_of<T>(p), shape.heads, shape.key_stride, shape.nk, shape.scale));
  DOMINO_CUDA_LAUNCHED("softmax_fwd_kernel");
}

void causal_softmax_bwd(const DevView& p, const DevView& dp, const SoftmaxShape& shape, StreamHandle s) {
  const int64_t threads = p.rows() * shape.heads * 32;
  DOMINO_DISPATCH_ELT(p.elt, softmax_bwd_kernel<T><<<unsigned((threads + 255) / 256), 256, 0, stream_of(s)>>>(
      view_of<T>(p), view_of<T>(dp), shape.heads, shape.key_stride, shape.nk, shape.scale));
  DOMINO_CUDA_LAUNCHED("softmax_bwd_kernel");
}

void cross_entropy(const CrossEntropyArgs& a, StreamHandle s) {
  const DevView &logits = a.logits, &targets = a.targets, &loss = a.loss, &dlogits = a.dlogits;
  const double tokens = a.tokens;
  const bool accumulate = a.accumulate;
  float* scratch = a.scratch;
  if (loss.elt != Elt::F32) throw_runtime("cross_entropy: the loss buffer must be fp32");
  DOMINO_CUDA_CHECK(cudaMemsetAsync(scratch, 0, sizeof(float), stream_of(s)));
  const int64_t rows = logits.rows();
  const float inv_tokens = float(1.0 / tokens);
  DOMINO_DISPATCH_ELT(logits.elt, {
    cross_entropy_kernel<T><<<unsigned((rows + 7) / 8), 256, 0, stream_of(s)>>>(
        view_of<T>(logits), view_of<float>(targets), view_of<T>(dlogits), inv_tokens, scratch);
  });
  store_loss_kernel<<<1, 1, 0, stream_of(s)>>>(scratch, static_cast<float*>(loss.base), accumulate);
  DOMINO_CUDA_LAUNCHED("cross_entropy_kernel");
}

}  // namespace domino::cuda
