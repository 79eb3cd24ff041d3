// cuda_gemm.hpp: the schedule's GEMM ops (MatMul, MatMulDgrad, MatMulWgrad) and attention's batched
// GEMMs through cuBLAS, on row-major regions (see DevView); fp32 accumulation for every dtype.
#pragma once

#include "executor/cuda/cuda_kernels.hpp"

#include <cstddef>

namespace domino::cuda {

// cuBLAS workspace per handle (the backend's and the profiler's alike, so both time the same kernels).
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;

// Row-major C[m,n] = alpha * op(A)[m,k] · op(B)[k,n] + beta*C, batched with element strides (0: shared operand).
struct GemmArgs {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  const void* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  void* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  int64_t batch = 1;
  float alpha = 1.f;
  float beta = 0.f;
  Elt elt = Elt::F32;
};
void gemm(void* cublas_handle, const GemmArgs& g);

// out (+)= in0 · in1      (MatMul; bias added by the caller)
void matmul(void* h, const DevView& in0, const DevView& in1, const DevView& out, bool accumulate);
// out (+)= in0 · in1^T    (MatMulDgrad)
void matmul_dgrad(void* h, const DevView& in0, const DevView& in1, const DevView& out, bool accumulate);
// out (+)= in0^T · in1    (MatMulWgrad), summed over every row block
void matmul_wgrad(void* h, const DevView& in0, const DevView& in1, const DevView& out, bool accumulate);

}  // namespace domino::cuda

namespace domino::cuda {

struct AttnShape {
  int heads = 0, kv_heads = 0, head_dim = 0;
  int64_t key_stride = 0;  // columns per head in the probabilities buffer (the model's seq_len)
  int64_t window = 0;      // sliding window: a query at i sees keys (i - window, i]; 0: all earlier keys
};
// Causal attention of AttnFwd (see sim/ir/schedule.hpp) through strided-batched GEMMs and the softmax kernel.
struct AttentionFwdArgs {
  DevView q, k, v;
  DevView p;    // probabilities (written)
  DevView ctx;  // context (written)
  AttnShape shape;
};
void attention_fwd(void* h, StreamHandle s, const AttentionFwdArgs& a);
// AttnBwd: dq "=", dk and dv "(+)=" with accumulate.
struct AttentionBwdArgs {
  DevView q, k, v, p, dctx;
  DevView dq, dk, dv;
  bool accumulate = false;
  int64_t overwrite_end = 0;  // with accumulate: dK/dV rows of key positions below it are written ("=")
  AttnShape shape;
  void* dp_scratch = nullptr;  // rows_per_batch * heads * key_stride elements of q's type
};
void attention_bwd(void* h, StreamHandle s, const AttentionBwdArgs& a);

}  // namespace domino::cuda
