// cuda_profile.cpp: GEMM and memory timing on the GPU with CUDA events (see cuda_profile.hpp). Operands are
// dense, in the op's dtype and filled with pseudo-random values: cuBLAS runs faster on zeros than on real data.
#include "executor/profiler/cuda_profile.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "executor/cuda/cuda_backend.hpp"
#include "executor/cuda/cuda_gemm.hpp"
#include "executor/cuda/cuda_kernels.hpp"
#include "sim/fit/stats.hpp"
#include "executor/runtime/check.hpp"
#include "sim/base/error.hpp"

namespace domino::cuda {

namespace {

Elt elt_of(DType d) {
  switch (d) {
    case DType::BF16: return Elt::BF16;
    case DType::FP16: return Elt::F16;
    case DType::FP32: return Elt::F32;
  }
  return Elt::F32;
}

class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) {
    DOMINO_CUDA_CHECK(cudaMalloc(&p_, std::max<size_t>(bytes, 256)));
    DOMINO_CUDA_CHECK(cudaMemset(p_, 0, std::max<size_t>(bytes, 256)));
  }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
};

// Times fn on the stream with events: warm-up, then repeats until enough time was measured.
std::vector<double> time_events(cudaStream_t s, const std::function<void()>& fn, bool quick) {
  cudaEvent_t a, b;
  DOMINO_CUDA_CHECK(cudaEventCreate(&a));
  DOMINO_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) fn();
  std::vector<double> samples;
  double total = 0;
  const int max_reps = quick ? 20 : 100;
  while (int(samples.size()) < max_reps && (samples.size() < 10 || total < (quick ? 2e4 : 1e5))) {
    DOMINO_CUDA_CHECK(cudaEventRecord(a, s));
    fn();
    DOMINO_CUDA_CHECK(cudaEventRecord(b, s));
    DOMINO_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    DOMINO_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    samples.push_back(ms * 1e3);
    total += ms * 1e3;
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return samples;
}

nlohmann::json entry(const prof::Probe& p, const std::vector<double>& samples) {
  const Op& op = p.op();
  return {{"label", p.label}, {"kind", to_string(op.kind)}, {"code", to_string(op.code)}, {"m", op.m},
          {"n", op.n}, {"k", op.k}, {"flops", op.flops}, {"bytes", op.bytes}, {"dtype", int(op.dtype)}, {"samples_us", samples}};
}

}  // namespace

nlohmann::json measure_compute(const prof::Workload& w, bool quick) {
  std::string why;
  if (cuda_device_count(&why) == 0) throw_runtime("--backend cuda: no usable CUDA device: " + why);
  DOMINO_CUDA_CHECK(cudaSetDevice(0));
  cudaStream_t stream;
  DOMINO_CUDA_CHECK(cudaStreamCreate(&stream));
  cublasHandle_t handle;
  DOMINO_CUBLAS_CHECK(cublasCreate(&handle));
  DOMINO_CUBLAS_CHECK(cublasSetStream(handle, stream));
  DeviceBuffer workspace(kCublasWorkspaceBytes);
  DOMINO_CUBLAS_CHECK(cublasSetWorkspace(handle, workspace.get(), kCublasWorkspaceBytes));
  nlohmann::json out = nlohmann::json::array();
  prof::Progress progress("domino-profile (cuda):");
  int i = 0;
  const int total = int(w.gemms.size() + w.memory_ops.size());
  for (const prof::Probe& p : w.gemms) {
    progress.step(p.label, ++i, total);
    const Op& op = p.op();
    const Elt elt = elt_of(op.dtype);
    const size_t eb = size_t(elt_bytes(elt));
    DeviceBuffer a(size_t(op.m * op.k) * eb), b(size_t(op.k * op.n) * eb), c(size_t(op.m * op.n) * eb);
    fill_random(dense_view(a.get(), elt, op.m, op.k), 1, stream);
    fill_random(dense_view(b.get(), elt, op.k, op.n), 2, stream);
    GemmArgs g;  // transposed as the backend runs each kind (cuda_gemm.cpp): dgrad B^T, wgrad A^T
    g.trans_a = op.code == OpCode::MatMulWgrad;
    g.trans_b = op.code == OpCode::MatMulDgrad;
    g.m = op.m;
    g.n = op.n;
    g.k = op.k;
    g.a = a.get();
    g.lda = g.trans_a ? op.m : op.k;
    g.b = b.get();
    g.ldb = g.trans_b ? op.k : op.n;
    g.c = c.get();
    g.ldc = op.n;
    g.elt = elt;
    out.push_back(entry(p, time_events(stream, [&] { gemm(handle, g); }, quick)));
  }
  for (const prof::Probe& p : w.memory_ops) {
    progress.step(p.label, ++i, total);
    // A device copy moving the op's bytes (half read, half written): the bandwidth the kernels approach.
    const size_t half = std::max<size_t>(size_t(p.op().bytes / 2), 256);
    DeviceBuffer src(half), dst(half);
    out.push_back(entry(p, time_events(stream, [&] {
      DOMINO_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), half, cudaMemcpyDeviceToDevice, stream));
    }, quick)));
  }
  progress.done();
  cublasDestroy(handle);
  cudaStreamDestroy(stream);
  return out;
}

}  // namespace domino::cuda
