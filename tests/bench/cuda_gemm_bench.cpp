// cuda_gemm_bench.cpp: cuBLAS GEMM throughput through the backend's own gemm() for the shapes the
// schedule builder emits, timed with CUDA events (manual time). Skips with an error when there is no GPU.
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "executor/cuda/cuda_backend.hpp"
#include "executor/cuda/cuda_gemm.hpp"
#include "executor/cuda/cuda_kernels.hpp"
#include "executor/runtime/check.hpp"

namespace {

using domino::cuda::Elt;

void BM_CudaGemm(benchmark::State& state) {
  std::string why;
  if (domino::cuda_device_count(&why) == 0) {
    state.SkipWithError(("no CUDA device: " + why).c_str());
    return;
  }
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const Elt elt = state.range(3) == 0 ? Elt::BF16 : Elt::F32;
  const size_t eb = elt == Elt::F32 ? 4 : 2;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  DOMINO_CUDA_CHECK(cudaMalloc(&a, eb * m * k));
  DOMINO_CUDA_CHECK(cudaMalloc(&b, eb * k * n));
  DOMINO_CUDA_CHECK(cudaMalloc(&c, eb * m * n));
  domino::cuda::fill_random(domino::cuda::dense_view(a, elt, m, k), 1, nullptr);  // zeros run faster than real data
  domino::cuda::fill_random(domino::cuda::dense_view(b, elt, k, n), 2, nullptr);
  cublasHandle_t h;
  DOMINO_CUBLAS_CHECK(cublasCreate(&h));
  domino::cuda::GemmArgs g;
  g.m = m, g.n = n, g.k = k, g.a = a, g.lda = k, g.b = b, g.ldb = n, g.c = c, g.ldc = n, g.elt = elt;
  cudaEvent_t t0, t1;
  DOMINO_CUDA_CHECK(cudaEventCreate(&t0));
  DOMINO_CUDA_CHECK(cudaEventCreate(&t1));
  for (int i = 0; i < 3; ++i) domino::cuda::gemm(h, g);
  double total_s = 0;
  for (auto _ : state) {
    DOMINO_CUDA_CHECK(cudaEventRecord(t0));
    domino::cuda::gemm(h, g);
    DOMINO_CUDA_CHECK(cudaEventRecord(t1));
    DOMINO_CUDA_CHECK(cudaEventSynchronize(t1));
    float ms = 0;
    DOMINO_CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
    state.SetIterationTime(ms / 1e3);
    total_s += ms / 1e3;
  }
  // From the event times themselves, not from whichever clock the library divides rate counters by.
  state.counters["TFLOP/s"] = 2.0 * double(m) * double(n) * double(k) * double(state.iterations()) / total_s / 1e12;
  DOMINO_CUDA_CHECK(cudaEventDestroy(t0));
  DOMINO_CUDA_CHECK(cudaEventDestroy(t1));
  DOMINO_CUBLAS_CHECK(cublasDestroy(h));
  DOMINO_CUDA_CHECK(cudaFree(a));
  DOMINO_CUDA_CHECK(cudaFree(b));
  DOMINO_CUDA_CHECK(cudaFree(c));
}

// GPT-3 2.7B (h 2560) and 13B (h 5120) layer GEMMs at 8k tokens, TP 1 and TP 8 shards; bf16 (0) and fp32 (1).
BENCHMARK(BM_CudaGemm)
    ->ArgsProduct({{8192}, {2560 * 3, 2560, 10240}, {2560}, {0}})
    ->ArgsProduct({{8192}, {5120 * 3 / 8, 5120 / 8, 20480 / 8}, {5120}, {0}})
    ->Args({8192, 8192, 8192, 0})
    ->Args({8192, 8192, 8192, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
