// cuda_gemm.cpp: cuBLAS calls for row-major, possibly strided, possibly batch-blocked regions.
#include "executor/cuda/cuda_gemm.hpp"

#include <cublas_v2.h>

#include "executor/runtime/check.hpp"

namespace domino::cuda {
namespace {

cudaDataType_t cuda_type(Elt e) {
  switch (e) {
    case Elt::F32: return CUDA_R_32F;
    case Elt::BF16: return CUDA_R_16BF;
    case Elt::F16: return CUDA_R_16F;
  }
  return CUDA_R_32F;
}

// A region is one plain row-major matrix when its rows are evenly spaced.
bool uniform(const DevView& v) { return v.nbatch == 1 || v.batch_stride == v.rows_per_batch * v.row_stride; }

char* at_block(const DevView& v, int64_t b) {
  return static_cast<char*>(v.base) + b * v.batch_stride * elt_bytes(v.elt);
}

}  // namespace

void gemm(void* cublas_handle, const GemmArgs& g) {
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  const cudaDataType_t t = cuda_type(g.elt);
  DOMINO_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      static_cast<cublasHandle_t>(cublas_handle), g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
      g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, int(g.n), int(g.m), int(g.k), &g.alpha, g.b, t, int(g.ldb), g.stride_b,
      g.a, t, int(g.lda), g.stride_a, &g.beta, g.c, t, int(g.ldc), g.stride_c, int(g.batch), CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT));
}

// The fields every product of two row-major operands into `out` shares: leading dimensions, output, type.
static GemmArgs product_into(const DevView& in0, const DevView& in1, const DevView& out, bool accumulate) {
  GemmArgs g;
  g.lda = in0.row_stride;
  g.ldb = in1.row_stride;
  g.c = out.base;
  g.ldc = out.row_stride;
  g.beta = accumulate ? 1.f : 0.f;
  g.elt = out.elt;
  return g;
}

static void rows_times_weight(void* h, const DevView& in0, const DevView& in1, const DevView& out, bool accumulate,
                              bool trans_b) {
  GemmArgs g = product_into(in0, in1, out, accumulate);
  g.trans_b = trans_b;
  g.n = out.ncols;
  g.k = in0.ncols;
  g.a = in0.base;
  g.b = in1.base;
  if (uniform(in0) && uniform(out)) {
    g.m = in0.rows();
  } else {
    g.m = in0.rows_per_batch;
    g.batch = in0.nbatch;
    g.stride_a = in0.batch_stride;
    g.stride_c = out.batch_stride;
  }
  gemm(h, g);
}

void matmul(void* h, const DevView& in0, const DevView& in1, const DevView& out, bool accumulate) {
  rows_times_weight(h, in0, in1, out, accumulate, false);
}

void matmul_dgrad(void* h, const DevView& in0, const DevView& in1, const DevView& out, bool accumulate) {
  rows_times_weight(h, in0, in1, out, accumulate, true);
}

void matmul_wgrad(void* h, const DevView& in0, const DevView& in1, const DevView& out, bool accumulate) {
  GemmArgs g = product_into(in0, in1, out, accumulate);
  g.trans_a = true;
  g.m = in0.ncols;
  g.n = in1.ncols;
  const bool one = uniform(in0) && uniform(in1);
  const int64_t blocks = one ? 1 : in0.nbatch;
  g.k = one ? in0.rows() : in0.rows_per_batch;
  // Row blocks all reduce into the same weight gradient: one GEMM per block, accumulating.
  for (int64_t b = 0; b < blocks; ++b) {
    g.a = at_block(in0, b);
    g.b = at_block(in1, b);
    g.beta = (accumulate || b > 0) ? 1.f : 0.f;
    gemm(h, g);
  }
}

}  // namespace domino::cuda
