// cuda_backend.hpp: the CUDA backend (cuBLAS GEMMs, own kernels, NCCL collectives, CUDA streams and
// events) behind the runtime's Backend interface, and its options, declared, defaulted, put on the command
// line and validated here only.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "executor/runtime/backend.hpp"

namespace CLI {
class App;
}

namespace domino {

struct CudaOptions {
  // --emulate-comm: every collective becomes a kernel moving a ring AllReduce's per-rank bytes of
  // `emulate_tp` ranks on `emulate_sms` SMs, paced to `emulate_busbw_gbps` (GB/s bus bandwidth) plus
  // `emulate_latency_us`. One GPU then measures overlap and interference without NCCL.
  bool emulate_comm = false;
  int emulate_tp = 8;
  int emulate_sms = 16;
  double emulate_busbw_gbps = 370;  // H100 NVLink ring AllReduce bus bandwidth (hardware-facts.md)
  double emulate_latency_us = 10;
  // Storage type of activations, parameters and gradients: "model" (the model's dtype), bf16, fp16, fp32.
  std::string dtype = "model";
  // The communication stream at the device's highest priority (--cuda-comm-priority high), as PyTorch's
  // high-priority NCCL streams (ProcessGroupNCCL's is_high_priority_stream): a collective launched while a
  // GEMM fills every SM then takes SMs as the GEMM's blocks retire, before the GEMM's pending blocks (a hint
  // to the block scheduler: running blocks are not preempted). At equal priority (normal) an H200 ran a
  // 40 MiB emulated AllReduce beside a GEMM in 780-920 us, against 260 alone.
  bool comm_high_priority = true;
  // Seconds a stream may wait at the end of an iteration before a peer counts as dead: the NCCL
  // communicator is then aborted and the rank fails instead of hanging in a collective. Not a flag of its
  // own: prepare() takes the run's --timeout from RankContext::timeout_s.
  int timeout_s = 30;
};

// A CUDA backend with these options (the device is touched only in prepare()).
std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& options);
// Adds the CUDA backend's flags (--emulate-comm, --emulate-tp, --emulate-sms, --emulate-busbw,
// --emulate-latency-us, --cuda-dtype, --cuda-comm-priority) to `app`, with their checks (a bad value is a
// parse error). Returns the backend's factory: it makes a backend with the values `app` has parsed by the
// time it is called.
std::function<std::unique_ptr<Backend>()> add_cuda_backend_flags(CLI::App& app);
// Free memory of the devices the given local ranks use (local rank modulo the visible devices), asked from
// a short-lived child process so that this one never holds a CUDA context; empty when there is no usable
// device. With ranks.self set, only that rank's device.
std::vector<MemoryPool> cuda_memory_pools(const HostRanks& ranks);
// Number of visible CUDA devices; 0 (with the reason in *why) when there is no usable device.
int cuda_device_count(std::string* why = nullptr);
// The device a rank uses: its local rank modulo the `count` visible devices.
int cuda_device_of(int local_rank, int count);

}  // namespace domino
