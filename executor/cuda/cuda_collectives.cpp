// cuda_collectives.cpp: the CUDA backend's collectives on the op's stream. AllReduce runs in place on its
// region; the sequence-parallel AllGather and ReduceScatter pack their rows into the stream's staging
// (cuda_sp_staging.cu, rank block after rank block), run NCCL's collective in place on it and unpack. With
// --emulate-comm a paced kernel moves the ring's per-rank bytes instead (cuda_emulated_comm.cu): the
// AllGather then stands in every rank's rows by this rank's own, the ReduceScatter keeps this rank's partial
// sums, as the emulated AllReduce keeps its values.
#include <nccl.h>

#include <string>

#include "executor/cuda/cuda_device_state.hpp"
#include "executor/runtime/check.hpp"
#include "executor/runtime/sp_collective.hpp"
#include "sim/base/error.hpp"
#include "sim/ir/collective_traffic.hpp"

namespace domino::cuda {
namespace {

ncclDataType_t nccl_type(Elt e) {
  switch (e) {
    case Elt::F32: return ncclFloat32;
    case Elt::BF16: return ncclBfloat16;
    case Elt::F16: return ncclFloat16;
  }
  return ncclFloat32;
}

// The paced kernel for `traffic_bytes` of ring traffic over `bytes` of `buffer`.
void emulate(const DeviceState& dev, void* buffer, int64_t bytes, double traffic_bytes, cudaStream_t s) {
  EmulatedCollectiveArgs e;
  e.buffer = buffer;
  e.buffer_bytes = bytes;
  e.traffic_bytes = int64_t(traffic_bytes);
  e.sms = dev.options.emulate_sms;
  e.bytes_per_us = dev.options.emulate_busbw_gbps * 1e3;  // GB/s -> bytes/us
  e.latency_us = dev.options.emulate_latency_us;
  e.clock_ghz = dev.clock_ghz;
  emulated_collective(e, s);
}

// Runs `call(comm)` on the live communicator, holding its lock (the other stream thread polls it).
template <typename Call>
void with_nccl(DeviceState& dev, const Op& op, Call&& call) {
  std::lock_guard<std::timed_mutex> lock(dev.nccl_mutex);
  void* comm = dev.nccl.load();
  if (!comm) {
    throw_runtime("rank " + std::to_string(dev.rank) + ": op " + op_id(op) + ": the NCCL communicator was aborted (" +
                  dev.abort_reason() + ")");
  }
  call(static_cast<ncclComm_t>(comm));
}

void all_reduce(DeviceState& dev, const Op& op, cudaStream_t s) {
  const DevView v = dev.view(op.out[0]);
  const int64_t count = v.rows() * v.ncols;
  const int64_t bytes = count * elt_bytes(v.elt);
  if (dev.options.emulate_comm)
    return emulate(dev, v.base, bytes, ring_allreduce_traffic(double(bytes), dev.options.emulate_tp), s);
  if (dev.world <= 1) return;  // a single rank: the sum over one rank is the buffer itself
  const ncclRedOp_t reduce = op.attrs.reduce == ReduceOp::Max ? ncclMax : ncclSum;
  with_nccl(dev, op, [&](ncclComm_t comm) {
    DOMINO_NCCL_CHECK(ncclAllReduce(v.base, v.base, size_t(count), nccl_type(v.elt), reduce, comm, s));
  });
}

// What an AllGather or ReduceScatter works on: its geometry, both views and this rank's block of the staging.
struct SpExchange {
  SpCollectiveShape g;
  DevView local, full;
  char* staging = nullptr;
  int64_t block_bytes = 0;  // one rank's block
  int slot = 0;             // this rank's block
  SpRowMap local_map() const { return {g.local_rows(), g.groups, g.part, g.part, 1}; }
  SpRowMap full_map() const { return {g.local_rows(), g.groups, g.part, g.group_rows, g.tp}; }
  char* block(int r) const { return staging + r * block_bytes; }
  int64_t full_bytes() const { return block_bytes * g.tp; }
};

SpExchange sp_exchange(DeviceState& dev, const Op& op, Stream stream) {
  SpExchange x;
  x.g = sp_collective_shape(*dev.schedule, op, dev.schedule->model.tp);
  x.local = dev.view(x.g.sharded);
  x.full = dev.view(x.g.full);
  const std::string where = "rank " + std::to_string(dev.rank) + ": op " + op_id(op) + ": ";
  if (x.local.elt != x.full.elt) throw_runtime(where + "its sharded and full buffers hold different element types");
  if (!dev.options.emulate_comm && x.g.tp != dev.world)
    throw_runtime(where + "a " + to_string(op.code) + " over the " + std::to_string(x.g.tp) +
                  " ranks of the schedule's TP group runs on a group of " + std::to_string(dev.world));
  x.staging = static_cast<char*>(dev.sp_staging[static_cast<int>(stream)]);
  if (!x.staging) throw_runtime(where + "no staging was allocated on its stream");
  x.block_bytes = x.g.local_elements() * elt_bytes(x.local.elt);
  x.slot = dev.rank % x.g.tp;  // one GPU standing for the whole group (--emulate-comm) takes rank 0's block
  return x;
}

void all_gather(DeviceState& dev, const Op& op, Stream stream, cudaStream_t s) {
  const SpExchange x = sp_exchange(dev, op, stream);
  if (dev.options.emulate_comm) {
    for (int r = 0; r < x.g.tp; ++r) sp_to_staging(x.local, x.local_map(), x.block(r), s);
    emulate(dev, x.staging, x.full_bytes(), ring_gather_traffic(double(x.full_bytes()), dev.options.emulate_tp), s);
  } else {
    sp_to_staging(x.local, x.local_map(), x.block(x.slot), s);
    if (dev.world > 1)
      with_nccl(dev, op, [&](ncclComm_t comm) {
        DOMINO_NCCL_CHECK(ncclAllGather(x.block(x.slot), x.staging, size_t(x.g.local_elements()),
                                        nccl_type(x.local.elt), comm, s));
      });
  }
  sp_from_staging(x.staging, x.full_map(), x.full, false, s);
}

void reduce_scatter(DeviceState& dev, const Op& op, Stream stream, cudaStream_t s) {
  const SpExchange x = sp_exchange(dev, op, stream);
  sp_to_staging(x.full, x.full_map(), x.staging, s);
  if (dev.options.emulate_comm) {
    emulate(dev, x.staging, x.full_bytes(), ring_gather_traffic(double(x.full_bytes()), dev.options.emulate_tp), s);
  } else if (dev.world > 1) {
    with_nccl(dev, op, [&](ncclComm_t comm) {
      DOMINO_NCCL_CHECK(ncclReduceScatter(x.staging, x.block(x.slot), size_t(x.g.local_elements()),
                                          nccl_type(x.local.elt), ncclSum, comm, s));
    });
  }
  sp_from_staging(x.block(x.slot), x.local_map(), x.local, op.attrs.accumulate, s);
}

}  // namespace

void run_collective(DeviceState& dev, const Op& op, Stream stream) {
  const cudaStream_t s = dev.stream(stream);
  switch (op.code) {
    case OpCode::AllReduce: return all_reduce(dev, op, s);
    case OpCode::AllGather: return all_gather(dev, op, stream, s);
    case OpCode::ReduceScatter: return reduce_scatter(dev, op, stream, s);
    default: throw_runtime("op " + op_id(op) + ": " + to_string(op.code) + " is not a collective");
  }
}

}  // namespace domino::cuda
