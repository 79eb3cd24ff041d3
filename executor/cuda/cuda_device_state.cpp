// cuda_device_state.cpp: allocation, upload/download and views of the CUDA backend's device state.
#include "executor/cuda/cuda_device_state.hpp"

#include <cublas_v2.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "executor/cuda/cuda_gemm.hpp"
#include "executor/runtime/check.hpp"

namespace domino::cuda {

Elt storage_elt(const CudaOptions& o, const ModelSpec& m, BufferRole role) {
  // Token ids and optimizer states stay fp32 whatever the training dtype.
  if (role == BufferRole::Data || role == BufferRole::OptState) return Elt::F32;
  const std::string& d = o.dtype;
  if (d == "fp32") return Elt::F32;
  if (d == "bf16") return Elt::BF16;
  if (d == "fp16") return Elt::F16;
  if (d != "model") throw_bad_input("--cuda-dtype must be model, bf16, fp16 or fp32 (got '" + d + "')");
  switch (m.dtype) {
    case DType::FP32: return Elt::F32;
    case DType::BF16: return Elt::BF16;
    case DType::FP16: return Elt::F16;
  }
  return Elt::F32;
}

void* DeviceState::track(size_t bytes) {
  void* p = nullptr;
  DOMINO_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 256)));
  allocations_.push_back(p);
  allocated_bytes += int64_t(bytes);
  return p;
}

void DeviceState::allocate(const Schedule& s) {
  schedule = &s;
  int clock_khz = 0;
  DOMINO_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device));
  if (clock_khz > 0) clock_ghz = clock_khz / 1e6;
  const size_t n = s.buffers.size();
  ptr.assign(n, nullptr);
  elt.assign(n, Elt::F32);
  master.assign(n, nullptr);
  int64_t max_h = 1, max_attn = 1;
  // Norm statistics, the loss and its per-token statistics stay fp32 as on the CPU: a 16-bit mean/rstd
  // makes the backward rebuild another xhat than the forward used, a bf16 loss moves in steps of 0.03, and
  // a bf16 sum of exp would round every token's loss.
  std::vector<bool> keep_fp32(n, false);
  for (const Op& op : s.ops) {
    if (op.code == OpCode::LayerNormFwd || op.code == OpCode::RmsNormFwd) keep_fp32[size_t(op.out[1].buffer)] = true;
    if (op.code == OpCode::CrossEntropy || op.code == OpCode::LogitMax || op.code == OpCode::LogitSumExp)
      keep_fp32[size_t(op.out[0].buffer)] = true;
  }
  for (size_t b = 0; b < n; ++b) {
    const BufferDesc& d = s.buffers[b];
    elt[b] = keep_fp32[b] ? Elt::F32 : storage_elt(options, s.model, d.role);
    ptr[b] = track(size_t(d.elements()) * elt_bytes(elt[b]));
    if (d.role == BufferRole::Param && elt[b] != Elt::F32) master[b] = static_cast<float*>(track(sizeof(float) * d.elements()));
    max_h = std::max(max_h, d.cols);
    staging_elements = std::max(staging_elements, d.elements());
  }
  int64_t embed_elements = 0;
  for (const Op& op : s.ops) {
    if (op.code == OpCode::AttnBwd) {
      const BufferDesc& probs = s.buffers[op.in[3].buffer];
      max_attn = std::max(max_attn, (op.in[0].s1 - op.in[0].s0) * probs.cols);
    }
    if (op.code == OpCode::EmbeddingBwd && elt[size_t(op.out[0].buffer)] != Elt::F32) {
      int64_t e = 0;
      for (int i = 0; i < op.n_out; ++i) e += s.buffers[op.out[i].buffer].elements();
      embed_elements = std::max(embed_elements, e);
    }
  }
  std::array<int64_t, kNumStreams> sp_bytes{};
  for (const Op& op : s.ops) {
    if (op.code != OpCode::AllGather && op.code != OpCode::ReduceScatter) continue;
    const Region& full = op.code == OpCode::AllGather ? op.out[0] : op.in[0];
    int64_t& most = sp_bytes[static_cast<int>(op.stream)];
    most = std::max(most, full.elements() * elt_bytes(elt[size_t(full.buffer)]));
  }
  for (int i = 0; i < kNumStreams; ++i)
    if (sp_bytes[i] > 0) sp_staging[i] = track(size_t(sp_bytes[i]));
  reduce_scratch = static_cast<float*>(track(sizeof(float) * 2 * max_h));
  attn_scratch = track(size_t(max_attn) * 4);
  if (embed_elements > 0) embed_scratch = static_cast<float*>(track(sizeof(float) * size_t(embed_elements)));
  flag = static_cast<int*>(track(sizeof(int)));
  staging = static_cast<float*>(track(sizeof(float) * staging_elements));
  int least = 0, greatest = 0;  // CUDA counts priorities down: greatest <= least
  DOMINO_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  for (int i = 0; i < kNumStreams; ++i) {
    const bool high = options.comm_high_priority && i == static_cast<int>(Stream::Comm);
    DOMINO_CUDA_CHECK(
        cudaStreamCreateWithPriority(&streams[i], cudaStreamNonBlocking, high ? greatest : least));
    cublasHandle_t h = nullptr;
    DOMINO_CUBLAS_CHECK(cublasCreate(&h));
    DOMINO_CUBLAS_CHECK(cublasSetStream(h, streams[i]));
    DOMINO_CUBLAS_CHECK(cublasSetWorkspace(h, track(kCublasWorkspaceBytes), kCublasWorkspaceBytes));
    cublas[i] = h;
  }
  start_event.resize(s.ops.size());
  end_event.resize(s.ops.size());
  for (size_t i = 0; i < s.ops.size(); ++i) {
    DOMINO_CUDA_CHECK(cudaEventCreate(&start_event[i]));
    DOMINO_CUDA_CHECK(cudaEventCreate(&end_event[i]));
  }
  DOMINO_CUDA_CHECK(cudaEventCreate(&origin));
}

DevView DeviceState::view(const Region& r) const {
  const BufferDesc& d = schedule->buffers[r.buffer];
  DevView v;
  v.elt = elt[r.buffer];
  v.row_stride = d.cols;
  v.batch_stride = d.seq * d.cols;
  v.rows_per_batch = r.s1 - r.s0;
  v.nbatch = r.b1 - r.b0;
  v.ncols = r.c1 - r.c0;
  v.seq0 = r.s0;
  v.base = static_cast<char*>(ptr[r.buffer]) + (r.b0 * d.seq * d.cols + r.s0 * d.cols + r.c0) * elt_bytes(v.elt);
  return v;
}

void DeviceState::upload(int32_t buffer, const std::vector<float>& host) {
  std::lock_guard<std::mutex> lock(staging_mutex_);
  const BufferDesc& d = schedule->buffers[buffer];
  const size_t bytes = sizeof(float) * d.elements();
  cudaStream_t s = streams[0];
  DOMINO_CUDA_CHECK(cudaMemcpyAsync(staging, host.data(), bytes, cudaMemcpyHostToDevice, s));
  Region whole{buffer, 0, d.batch, 0, d.seq, 0, d.cols};
  f32_to_view(staging, view(whole), s);
  if (master[buffer]) DOMINO_CUDA_CHECK(cudaMemcpyAsync(master[buffer], staging, bytes, cudaMemcpyDeviceToDevice, s));
  DOMINO_CUDA_CHECK(cudaStreamSynchronize(s));
}

void DeviceState::zero(int32_t buffer) {
  const BufferDesc& d = schedule->buffers[buffer];
  cudaStream_t s = streams[0];
  DOMINO_CUDA_CHECK(cudaMemsetAsync(ptr[buffer], 0, size_t(d.elements()) * elt_bytes(elt[buffer]), s));
  if (master[buffer])
    DOMINO_CUDA_CHECK(cudaMemsetAsync(master[buffer], 0, sizeof(float) * size_t(d.elements()), s));
  DOMINO_CUDA_CHECK(cudaStreamSynchronize(s));
}

void DeviceState::fill_random(int32_t buffer, uint32_t seed) {
  const BufferDesc& d = schedule->buffers[buffer];
  cudaStream_t s = streams[0];
  const DevView whole = view(Region{buffer, 0, d.batch, 0, d.seq, 0, d.cols});
  cuda::fill_random(whole, seed, s);
  if (master[buffer]) view_to_f32(whole, master[buffer], s);
  DOMINO_CUDA_CHECK(cudaStreamSynchronize(s));
}

std::vector<float> DeviceState::download(const Region& r) {
  std::lock_guard<std::mutex> lock(staging_mutex_);
  DOMINO_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> host(size_t(r.elements()));
  cudaStream_t s = streams[0];
  view_to_f32(view(r), staging, s);
  DOMINO_CUDA_CHECK(cudaMemcpyAsync(host.data(), staging, sizeof(float) * host.size(), cudaMemcpyDeviceToHost, s));
  DOMINO_CUDA_CHECK(cudaStreamSynchronize(s));
  return host;
}

bool DeviceState::finite(const Region& r) {
  std::lock_guard<std::mutex> lock(staging_mutex_);
  DOMINO_CUDA_CHECK(cudaDeviceSynchronize());
  cudaStream_t s = streams[0];
  int found = 0;
  DOMINO_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int), s));
  find_nonfinite(view(r), flag, s);
  DOMINO_CUDA_CHECK(cudaMemcpyAsync(&found, flag, sizeof(int), cudaMemcpyDeviceToHost, s));
  DOMINO_CUDA_CHECK(cudaStreamSynchronize(s));
  return found == 0;
}

void DeviceState::sync_stream(cudaStream_t s) {
  if (!nccl.load()) {
    DOMINO_CUDA_CHECK(cudaStreamSynchronize(s));
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options.timeout_s);
  for (;;) {
    const cudaError_t rc = cudaStreamQuery(s);
    if (rc == cudaSuccess) return;
    if (rc != cudaErrorNotReady) DOMINO_CUDA_CHECK(rc);
    std::string failure;
    {
      // Busy: the other stream thread is enqueuing a collective; poll again next round.
      std::unique_lock<std::timed_mutex> lock(nccl_mutex, std::try_to_lock);
      void* comm = lock.owns_lock() ? nccl.load() : nullptr;
      ncclResult_t async = ncclSuccess;
      if (comm) DOMINO_NCCL_CHECK(ncclCommGetAsyncError(static_cast<ncclComm_t>(comm), &async));
      if (async != ncclSuccess && async != ncclInProgress) {
        failure = std::string("NCCL reported an asynchronous error (") + ncclGetErrorString(async) + ")";
      }
    }
    if (failure.empty() && std::chrono::steady_clock::now() > deadline) {
      failure = "the device was still busy " + std::to_string(options.timeout_s) +
                " s after the iteration was issued (a peer rank may have died inside a collective; --timeout "
                "sets the wait)";
    }
    if (!failure.empty()) {
      failure = "rank " + std::to_string(rank) + ": " + failure;
      // A collective stuck in its enqueue keeps the lock: after a second abort anyway, which is what
      // ncclCommAbort is for (it makes the blocked call return).
      std::unique_lock<std::timed_mutex> lock(nccl_mutex, std::defer_lock);
      (void)lock.try_lock_for(std::chrono::seconds(1));
      abort_nccl(failure);
      throw_runtime(failure + "; the NCCL communicator was aborted");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void DeviceState::abort_nccl(const std::string& reason) {
  bool expected = false;
  if (!aborting_.compare_exchange_strong(expected, true)) return;  // the other stream thread got there first
  abort_reason_ = reason;
  reason_ready_.store(true);
  // Best effort: the error that made us abort is what the user must see.
  if (void* comm = nccl.exchange(nullptr)) ncclCommAbort(static_cast<ncclComm_t>(comm));
}

void DeviceState::release() {
  // Best effort at tear-down: errors here must not mask the error that ended the run.
  {
    std::unique_lock<std::timed_mutex> lock(nccl_mutex, std::defer_lock);
    (void)lock.try_lock_for(std::chrono::seconds(1));
    abort_nccl("the run ended");
  }
  for (auto& e : start_event) cudaEventDestroy(e);
  for (auto& e : end_event) cudaEventDestroy(e);
  start_event.clear();
  end_event.clear();
  if (origin) cudaEventDestroy(origin);
  origin = nullptr;
  for (int i = 0; i < kNumStreams; ++i) {
    if (cublas[i]) cublasDestroy(static_cast<cublasHandle_t>(cublas[i]));
    if (streams[i]) cudaStreamDestroy(streams[i]);
    cublas[i] = nullptr;
    streams[i] = nullptr;
  }
  for (void* p : allocations_) cudaFree(p);
  allocations_.clear();
  sp_staging = {};
}

}  // namespace domino::cuda
