// cuda_device_state.hpp: everything the CUDA backend holds on one device for one schedule: buffers
// (allocated once), fp32 master weights, streams with their cuBLAS handles, per-op events, scratch.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "executor/cuda/cuda_backend.hpp"
#include "executor/cuda/cuda_kernels.hpp"

namespace domino::cuda {

struct DeviceState {
  CudaOptions options;
  int device = 0;
  int rank = 0;
  int world = 1;  // ranks in the TP group
  OptimizerHyper hyper;
  int64_t step = 1;
  const Schedule* schedule = nullptr;

  std::vector<void*> ptr;      // per buffer
  std::vector<Elt> elt;        // per buffer
  std::vector<float*> master;  // per buffer: fp32 master weights of 16-bit parameters, else nullptr
  std::array<cudaStream_t, kNumStreams> streams{};
  std::array<void*, kNumStreams> cublas{};  // cublasHandle_t, one per stream
  std::vector<cudaEvent_t> start_event, end_event;  // per op
  cudaEvent_t origin = nullptr;  // start of the current iteration
  float* reduce_scratch = nullptr;  // fp32 column sums (norm and bias gradients, loss)
  void* attn_scratch = nullptr;     // dP of the largest attention backward
  float* embed_scratch = nullptr;   // fp32 sums of 16-bit embedding gradients (table, then positions)
  int* flag = nullptr;              // NaN scan result
  float* staging = nullptr;         // fp32 staging for uploads and downloads
  int64_t staging_elements = 0;
  // Per stream: the contiguous rows a sequence-parallel AllGather / ReduceScatter exchanges (nullptr when the
  // stream has none), sized for its largest full region.
  std::array<void*, kNumStreams> sp_staging{};
  // ncclComm_t when real collectives are used; atomic: a stream thread may abort it while the other issues.
  // nccl_mutex is held around every call on it (NCCL allows one thread at a time on a communicator).
  std::atomic<void*> nccl{nullptr};
  std::timed_mutex nccl_mutex;
  int64_t allocated_bytes = 0;
  double clock_ghz = 1.5;

  cudaStream_t stream(Stream s) const { return streams[static_cast<int>(s)]; }
  void allocate(const Schedule& s);
  void upload(int32_t buffer, const std::vector<float>& host);
  void zero(int32_t buffer);                        // all zeros, fp32 master included
  void fill_random(int32_t buffer, uint32_t seed);  // values in [-1, 1] drawn on the device, master included
  std::vector<float> download(const Region& r);
  bool finite(const Region& r);
  DevView view(const Region& r) const;
  // Waits for a stream's work. With NCCL it polls instead of blocking: an asynchronous NCCL error, or work
  // still pending after options.timeout_s, aborts the communicator and throws (a dead peer would leave
  // our collective spinning forever).
  void sync_stream(cudaStream_t s);
  // Why the communicator was aborted ("" if it was not): for the error of a collective issued afterwards.
  std::string abort_reason() const { return reason_ready_.load() ? abort_reason_ : std::string(); }
  void release();

 private:
  void abort_nccl(const std::string& reason);
  std::vector<void*> allocations_;
  std::mutex staging_mutex_;  // the compute and comm stream threads both download (dumps, NaN scans)
  std::atomic<bool> aborting_{false};      // one thread aborts, once
  std::string abort_reason_;               // written once by that thread, then reason_ready_ is set
  std::atomic<bool> reason_ready_{false};
  void* track(size_t bytes);
};

// The element type a buffer of this role is stored in on the device (--cuda-dtype, else the model's).
Elt storage_elt(const CudaOptions& options, const ModelSpec& model, BufferRole role);

// Enqueues one op of the schedule on the stream `s` of the device.
void run_op(DeviceState& dev, const Op& op, Stream s);
// Enqueues an AllReduce, AllGather or ReduceScatter (NCCL, or the paced kernel of --emulate-comm).
void run_collective(DeviceState& dev, const Op& op, Stream s);

}  // namespace domino::cuda
