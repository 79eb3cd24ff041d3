// cuda_emulated_comm.cu: --emulate-comm. One GPU cannot host several NCCL ranks, so each collective
// becomes a kernel on the communication stream that reads and writes the bytes a ring collective of the
// emulated TP degree moves per rank (AllReduce: 2(n-1)/n of its buffer; AllGather and ReduceScatter: (n-1)/n
// of the full buffer), on a chosen number of SMs (NCCL occupies SMs too), paced so it lasts at least as long
// as the link's latency and bandwidth allow (the cost model's ring formula). The data itself is left
// unchanged: an AllReduce keeps this rank's values (each rank would hold the same sum), and the
// sequence-parallel pair stands in every other rank's rows by this rank's own (cuda_collectives.cpp).
#include "executor/cuda/cuda_common.cuh"

namespace domino::cuda {
namespace {

__global__ void emulated_ring_kernel(float4* buf, int64_t n4, int64_t traffic4, long long min_cycles, float one) {
  const long long t0 = clock64();
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  // Each pass reads and rewrites the buffer in place (value preserved): traffic in 16-byte words.
  for (int64_t done = 0; done < traffic4; done += n4) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n4 && done + i < traffic4; i += stride) {
      float4 v = buf[i];
      v.x *= one;  // a run-time 1.0: the compiler cannot drop the load and store
      buf[i] = v;
    }
  }
  // Pace to the link: spin (without memory traffic) until the modelled transfer time has passed.
  while (clock64() - t0 < min_cycles) {
  }
}

}  // namespace

void emulated_collective(const EmulatedCollectiveArgs& a, StreamHandle s) {
  const int64_t n4 = a.buffer_bytes / 16;
  if (n4 == 0 || a.traffic_bytes <= 0) return;
  const double us = a.latency_us + (a.bytes_per_us > 0 ? double(a.traffic_bytes) / a.bytes_per_us : 0.0);
  const long long min_cycles = static_cast<long long>(us * a.clock_ghz * 1e3);
  emulated_ring_kernel<<<unsigned(a.sms > 0 ? a.sms : 1), 512, 0, stream_of(s)>>>(
      static_cast<float4*>(a.buffer), n4, a.traffic_bytes / 16, min_cycles, 1.0f);
  DOMINO_CUDA_LAUNCHED("emulated_ring_kernel");
}

}  // namespace domino::cuda
