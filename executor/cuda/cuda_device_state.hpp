// cuda_device_state.hpp: everything the CUDA backend holds on one device for one schedule: buffers
// (allocated once), fp32 master weights, streams with their cuBLAS handles, per-op events, scratch.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <vector>

#include "executor/cuda/cuda_backend.hpp"
#include "executor/cuda/cuda_kernels.hpp"

namespace domino::cuda {

struct DeviceState {
  CudaOptions options;
  int device = 0;
  int rank = 0;
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
  int* flag = nullptr;              // NaN scan result
  float* staging = nullptr;         // fp32 staging for uploads and downloads
  int64_t staging_elements = 0;
  void* nccl = nullptr;             // ncclComm_t when real collectives are used
  int64_t allocated_bytes = 0;
  double clock_ghz = 1.5;

  cudaStream_t stream(Stream s) const { return streams[static_cast<int>(s)]; }
  void allocate(const Schedule& s);
  void upload(int32_t buffer, const std::vector<float>& host);
  std::vector<float> download(const Region& r);
  bool finite(const Region& r);
  DevView view(const Region& r) const;
  void release();

 private:
  std::vector<void*> allocations_;
  void* track(size_t bytes);
};

// Enqueues one op of the schedule on the stream `s` of the device.
void run_op(DeviceState& dev, const Op& op, Stream s);

}  // namespace domino::cuda
