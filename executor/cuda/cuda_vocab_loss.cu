// cuda_vocab_loss.cu: the vocabulary-parallel cross-entropy (Megatron-LM's) in three kernels around two
// AllReduces: the per-token max over this shard's logits; the sum of exp(logit - global max) with the
// target's logit when it lies in this shard; then the loss and this shard's dlogits from the global sums.
// One warp per token row; statistics in fp32 whatever the logits' dtype. Columns at or beyond `real` are
// padding of the last shard.
#include <cfloat>
#include <cmath>
#include <string>

#include "executor/cuda/cuda_common.cuh"

namespace domino::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // warps of a 256-thread block

template <typename T>
__global__ void logit_max_kernel(View<T> logits, View<float> max, int64_t real) {
  const int64_t r = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= logits.rows()) return;
  const T* x = logits.row(r);
  float m = -INFINITY;
  for (int64_t k = lane; k < real; k += 32) m = fmaxf(m, to_f(x[k]));
  m = warp_max(m);
  // A shard of padding only: the lowest finite float (never the group's max; the NaN/Inf scan stays quiet).
  if (lane == 0) max.row(r)[0] = real > 0 ? m : -FLT_MAX;
}

template <typename T>
__global__ void logit_sum_exp_kernel(View<T> logits, View<float> targets, View<float> max, View<float> sums,
                                     int64_t first, int64_t real) {
  const int64_t r = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= logits.rows()) return;
  const T* x = logits.row(r);
  const float m = max.row(r)[0];
  float sum = 0;
  for (int64_t k = lane; k < real; k += 32) sum += __expf(to_f(x[k]) - m);
  sum = warp_sum(sum);
  if (lane != 0) return;
  const int64_t t = static_cast<int64_t>(targets.row(r)[0]) - first;
  sums.row(r)[0] = sum;
  sums.row(r)[1] = t >= 0 && t < real ? to_f(x[t]) : 0.f;
}

template <typename T>
__global__ void vocab_ce_kernel(View<T> logits, View<float> targets, View<float> max, View<float> sums,
                                View<T> dlogits, int64_t first, int64_t real, float inv_tokens,
                                float* scratch) {
  const int64_t r = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= logits.rows()) return;
  const T* x = logits.row(r);
  T* g = dlogits.row(r);
  const int64_t t = static_cast<int64_t>(targets.row(r)[0]) - first;
  const float m = max.row(r)[0], sum = sums.row(r)[0], target_logit = sums.row(r)[1];
  // Each lane reads an element before it writes the same one: dlogits may alias the logits.
  for (int64_t k = lane; k < logits.ncols; k += 32) {
    const float p = k < real ? __expf(to_f(x[k]) - m) / sum : 0.f;
    g[k] = from_f<T>((p - (k == t ? 1.f : 0.f)) * inv_tokens);
  }
  if (lane == 0) atomicAdd(scratch, (logf(sum) + m - target_logit) * inv_tokens);
}

// The loss is fp32 (allocate()): bf16 would round it to steps of 0.03.
__global__ void store_vocab_loss_kernel(const float* scratch, float* loss, bool accumulate) {
  loss[0] = scratch[0] + (accumulate ? loss[0] : 0.f);
}

unsigned row_blocks(int64_t rows) { return unsigned((rows + kRowsPerBlock - 1) / kRowsPerBlock); }

void require_fp32(const DevView& v, const char* what) {
  if (v.elt != Elt::F32)
    throw_runtime(std::string("vocab-parallel cross-entropy: the ") + what + " buffer must be fp32");
}

}  // namespace

void logit_max(const VocabLossArgs& a, StreamHandle s) {
  require_fp32(a.max, "max");
  DOMINO_DISPATCH_ELT(a.logits.elt,
                      logit_max_kernel<T><<<row_blocks(a.logits.rows()), 256, 0, stream_of(s)>>>(
                          view_of<T>(a.logits), view_of<float>(a.max), a.real));
  DOMINO_CUDA_LAUNCHED("logit_max_kernel");
}

void logit_sum_exp(const VocabLossArgs& a, StreamHandle s) {
  require_fp32(a.max, "max");
  require_fp32(a.sums, "sums");
  DOMINO_DISPATCH_ELT(a.logits.elt,
                      logit_sum_exp_kernel<T><<<row_blocks(a.logits.rows()), 256, 0, stream_of(s)>>>(
                          view_of<T>(a.logits), view_of<float>(a.targets), view_of<float>(a.max),
                          view_of<float>(a.sums), a.first, a.real));
  DOMINO_CUDA_LAUNCHED("logit_sum_exp_kernel");
}

void vocab_cross_entropy(const VocabLossArgs& a, StreamHandle s) {
  require_fp32(a.max, "max");
  require_fp32(a.sums, "sums");
  require_fp32(a.loss, "loss");
  DOMINO_CUDA_CHECK(cudaMemsetAsync(a.scratch, 0, sizeof(float), stream_of(s)));
  const float inv_tokens = float(1.0 / a.tokens);
  DOMINO_DISPATCH_ELT(a.logits.elt, vocab_ce_kernel<T><<<row_blocks(a.logits.rows()), 256, 0, stream_of(s)>>>(
                                        view_of<T>(a.logits), view_of<float>(a.targets),
                                        view_of<float>(a.max), view_of<float>(a.sums), view_of<T>(a.dlogits),
                                        a.first, a.real, inv_tokens, a.scratch));
  store_vocab_loss_kernel<<<1, 1, 0, stream_of(s)>>>(a.scratch, static_cast<float*>(a.loss.base),
                                                     a.accumulate);
  DOMINO_CUDA_LAUNCHED("vocab_ce_kernel");
}

}  // namespace domino::cuda
