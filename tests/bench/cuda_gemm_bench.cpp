// cuda_gemm_bench.cpp: cuBLAS GEMM throughput through the backend's own gemm() for the shapes the
// schedule builder emits, timed with CUDA events (manual time). Skips with an error when there is no GPU.
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "executor/cuda/cuda_backend.hpp"
#include "executor/cuda/cuda_gemm.hpp"

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
  cudaMalloc(&a, eb * m * k);
  cudaMalloc(&b, eb * k * n);
  cudaMalloc(&c, eb * m * n);
  cudaMemset(a, 0x3c, eb * m * k);  // non-zero data: zeros can run faster than real values
  cudaMemset(b, 0x3c, eb * k * n);
  cublasHandle_t h;
  cublasCreate(&h);
  domino::cuda::GemmArgs g;
  g.m = m, g.n = n, g.k = k, g.a = a, g.lda = k, g.b = b, g.ldb = n, g.c = c, g.ldc = n, g.elt = elt;
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  for (int i = 0; i < 3; ++i) domino::cuda::gemm(h, g);
  for (auto _ : state) {
    cudaEventRecord(t0);
    domino::cuda::gemm(h, g);
    cudaEventRecord(t1);
    cudaEventSynchronize(t1);
    float ms = 0;
    cudaEventElapsedTime(&ms, t0, t1);
    state.SetIterationTime(ms / 1e3);
  }
  state.counters["TFLOP/s"] =
      benchmark::Counter(2.0 * m * n * k * state.iterations() / 1e12, benchmark::Counter::kIsRate);
  cublasDestroy(h);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
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
