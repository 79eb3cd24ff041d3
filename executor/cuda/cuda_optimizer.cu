// cuda_optimizer.cu: the optimizer step (AdamW and SGD with momentum) on fp32 master weights and states.
#include "executor/cuda/cuda_common.cuh"

namespace domino::cuda {
namespace {

// Parameters and gradients are dense here (whole buffers). master == nullptr: the parameter is fp32 itself.
template <typename T>
__global__ void adam_kernel(const T* grad, T* param, float* master, float* m, float* v, int64_t n, float lr, float b1,
                            float b2, float eps, float wd, float c1, float c2) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float g = to_f(grad[i]);
    float w = master ? master[i] : to_f(param[i]);
    m[i] = b1 * m[i] + (1.f - b1) * g;
    v[i] = b2 * v[i] + (1.f - b2) * g * g;
    w -= lr * ((m[i] / c1) / (sqrtf(v[i] / c2) + eps) + wd * w);
    if (master) master[i] = w;
    param[i] = from_f<T>(w);
  }
}

template <typename T>
__global__ void sgd_kernel(const T* grad, T* param, float* master, float* mom, int64_t n, float lr, float momentum,
                           float wd) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float w = master ? master[i] : to_f(param[i]);
    mom[i] = momentum * mom[i] + to_f(grad[i]) + wd * w;  // L2 weight decay through the momentum, as the CPU
    w -= lr * mom[i];
    if (master) master[i] = w;
    param[i] = from_f<T>(w);
  }
}

}  // namespace

void adam_step(const AdamStepArgs& a, StreamHandle s) {
  const float c1 = 1.f - powf(a.beta1, float(a.step)), c2 = 1.f - powf(a.beta2, float(a.step));
  DOMINO_DISPATCH_ELT(a.param.elt, adam_kernel<T><<<grid_for(a.n), 256, 0, stream_of(s)>>>(
      static_cast<const T*>(a.grad.base), static_cast<T*>(a.param.base), a.master, a.m, a.v, a.n, a.lr, a.beta1,
      a.beta2, a.eps, a.weight_decay, c1, c2));
  DOMINO_CUDA_LAUNCHED("adam_kernel");
}

void sgd_step(const SgdStepArgs& a, StreamHandle s) {
  DOMINO_DISPATCH_ELT(a.param.elt, sgd_kernel<T><<<grid_for(a.n), 256, 0, stream_of(s)>>>(
      static_cast<const T*>(a.grad.base), static_cast<T*>(a.param.base), a.master, a.mom, a.n, a.lr, a.momentum,
      a.weight_decay));
  DOMINO_CUDA_LAUNCHED("sgd_kernel");
}

}  // namespace domino::cuda
