// cuda_backend.cpp: CudaBackend allocates every buffer once on the device, initialises it from the same
// host values as the CPU backend, and gives the runtime one CudaStreamDriver per IR stream. Drivers only
// enqueue: ops, their start/end events and cross-stream waits go onto CUDA streams, and the host reads
// the events once per iteration.
#include "executor/cuda/cuda_backend.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "executor/cuda/cuda_device_state.hpp"
#include "executor/cuda/cuda_gemm.hpp"
#include "executor/cuda/cuda_nccl_algorithms.hpp"
#include "executor/runtime/check.hpp"
#include "executor/runtime/gloo_comm.hpp"
#include "executor/runtime/param_init.hpp"
#include "sim/base/cli_parse.hpp"

namespace domino {
namespace {


class CudaStreamDriver : public StreamDriver {
 public:
  CudaStreamDriver(cuda::DeviceState& dev, Stream stream) : dev_(dev), stream_(stream) {
    for (const Op& op : dev_.schedule->ops)
      if (op.stream == stream) mine_.push_back(op.index);
  }
  void attach_thread() override { DOMINO_CUDA_CHECK(cudaSetDevice(dev_.device)); }
  void begin_iteration(SteadyClock::time_point) override {
    // Nothing may start before the iteration's origin event (recorded on the compute stream).
    if (stream_ != Stream::Compute) DOMINO_CUDA_CHECK(cudaStreamWaitEvent(dev_.stream(stream_), dev_.origin, 0));
  }
  void wait_for(const Op& dep) override {
    DOMINO_CUDA_CHECK(cudaStreamWaitEvent(dev_.stream(stream_), dev_.end_event[dep.index], 0));
  }
  void issue(const Op& op) override {
    cudaStream_t s = dev_.stream(stream_);
    DOMINO_CUDA_CHECK(cudaEventRecord(dev_.start_event[op.index], s));
    cuda::run_op(dev_, op, stream_);
    DOMINO_CUDA_CHECK(cudaEventRecord(dev_.end_event[op.index], s));
  }
  void synchronize() override { dev_.sync_stream(dev_.stream(stream_)); }
  std::vector<OpTiming> finish_iteration() override {
    synchronize();
    std::vector<OpTiming> out;
    out.reserve(mine_.size());
    for (int32_t i : mine_) {
      float start_ms = 0, end_ms = 0;
      DOMINO_CUDA_CHECK(cudaEventElapsedTime(&start_ms, dev_.origin, dev_.start_event[i]));
      DOMINO_CUDA_CHECK(cudaEventElapsedTime(&end_ms, dev_.origin, dev_.end_event[i]));
      out.push_back({i, start_ms * 1e3, end_ms * 1e3});
    }
    return out;
  }

 private:
  cuda::DeviceState& dev_;
  Stream stream_;
  std::vector<int32_t> mine_;
};

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(CudaOptions options) { dev_.options = std::move(options); }
  ~CudaBackend() override { dev_.release(); }
  std::string name() const override { return "cuda"; }
  TimingMode timing_mode() const override { return TimingMode::DeviceEvents; }
  // A per-op scan would synchronise the device after every op and serialise the streams.
  bool scans_for_nan_by_default() const override { return false; }

  void prepare(const Schedule& schedule, const RankContext& ctx) override {
    std::string why;
    const int count = cuda_device_count(&why);
    if (count == 0) throw_runtime("rank " + std::to_string(ctx.rank) + ": no usable CUDA device: " + why);
    // NCCL refuses two ranks of one communicator on one GPU, and ranks sharing a GPU would time each other.
    // Only this host's ranks share its devices (both launch paths export LOCAL_WORLD_SIZE when they know it).
    const char* local_world = std::getenv("LOCAL_WORLD_SIZE");
    const int host_ranks = local_world && std::atoi(local_world) > 0 ? std::atoi(local_world) : ctx.world;
    if (host_ranks > count && !dev_.options.emulate_comm)
      throw_bad_input("rank " + std::to_string(ctx.rank) + ": " + std::to_string(host_ranks) + " ranks but " +
                      std::to_string(count) + " CUDA device(s): one device per rank (or --emulate-comm on one)");
    const char* local = std::getenv("LOCAL_RANK");
    dev_.device = cuda_device_of(local ? std::atoi(local) : ctx.rank, count);
    dev_.rank = ctx.rank;
    dev_.world = ctx.world;
    dev_.hyper = ctx.hyper;
    dev_.options.timeout_s = ctx.timeout_s;
    DOMINO_CUDA_CHECK(cudaSetDevice(dev_.device));
    dev_.allocate(schedule);
    std::vector<float> host;
    for (int32_t b = 0; b < int32_t(schedule.buffers.size()); ++b) {
      if (starts_at_zero(schedule, b)) {
        dev_.zero(b);
      } else if (!ctx.reproducible_values && schedule.buffers[b].role == BufferRole::Param) {
        dev_.fill_random(b, uint32_t(ctx.seed * 1000003u + uint64_t(b)));
      } else {
        host.resize(size_t(schedule.buffers[b].elements()));
        initial_values(schedule, b, ctx.rank, ctx.seed, host.data());
        dev_.upload(b, host);
      }
    }
    if (!dev_.options.emulate_comm && ctx.world > 1) init_nccl(ctx);
    DOMINO_CUDA_CHECK(cudaDeviceSynchronize());
  }

  std::unique_ptr<StreamDriver> make_stream_driver(Stream stream) override {
    return std::make_unique<CudaStreamDriver>(dev_, stream);
  }
  void begin_iteration(int64_t step) override {
    dev_.step = step;
    DOMINO_CUDA_CHECK(cudaEventRecord(dev_.origin, dev_.stream(Stream::Compute)));
  }
  std::vector<float> read_region(const Region& region) override { return dev_.download(region); }
  bool region_finite(const Region& region) override { return dev_.finite(region); }
  int64_t peak_memory_bytes() const override { return dev_.allocated_bytes; }
  // Each rank allocates on its own device (several only with --emulate-comm); its host thread only enqueues.
  HostFootprint host_footprint(const Schedule& schedule, int, const HostRanks& ranks) const override {
    HostFootprint f;
    f.bytes_per_rank = device_bytes_lower_bound(schedule);
    f.pools = cuda_memory_pools(ranks);
    return f;
  }
  // GPU models train in bf16; ops take microseconds: chains of 8 queued ops hide the launch gaps.
  // One pass over a stage's probes: a device's clocks do not drift as a shared host's do, and each pass
  // prepares every probe again, which the GPU check's profile budget has not been measured with.
  ProfilingTraits profiling_traits() const override {
    return {.gemm_dtype = DType::BF16,
            .min_chain = 8,
            .probe_budget_us = 100'000,
            .gemms_in_op_dtype = true,
            .compute_passes = 1,
            .whole_blocked_gemms = false};
  }
  // NVLS support is a property of the node (NVSwitch multicast), the same on every device: device 0 asks.
  std::vector<std::string> forceable_collective_algorithms(int world) const override {
    if (dev_.options.emulate_comm || cuda_device_count() == 0) return {};
    return cuda::nccl_forceable_algorithms(world, 0);
  }

 private:
  void init_nccl(const RankContext& ctx) {
    if (!ctx.comm) throw_runtime("the CUDA backend needs the rendezvous store to exchange the NCCL id");
    // One key per communicator this process creates: a rank that prepares several backends on one group
    // (domino-profile: one per probe) must never read the id of an earlier communicator.
    static std::atomic<int> communicators{0};
    const std::string key = "nccl_unique_id." + std::to_string(communicators++);
    ncclUniqueId id;
    if (ctx.rank == 0) {
      DOMINO_NCCL_CHECK(ncclGetUniqueId(&id));
      ctx.comm->store_set(key, std::string(reinterpret_cast<const char*>(&id), sizeof(id)));
    } else {
      const std::string blob = ctx.comm->store_get(key);
      if (blob.size() != sizeof(id)) throw_runtime("malformed NCCL unique id in the rendezvous store");
      std::memcpy(&id, blob.data(), sizeof(id));
    }
    ncclComm_t comm = nullptr;
    {
      const cuda::ScopedNcclAlgorithm forced(ctx.collective_algorithm);  // NCCL reads NCCL_ALGO at init
      DOMINO_NCCL_CHECK(ncclCommInitRank(&comm, ctx.world, id, ctx.rank));
    }
    dev_.nccl = comm;
  }

  // The buffers in their storage type, fp32 masters of 16-bit parameters, one cuBLAS workspace per stream
  // (DeviceState::allocate); its scratch, NCCL's buffers and the CUDA context come on top.
  int64_t device_bytes_lower_bound(const Schedule& schedule) const {
    int64_t bytes = int64_t(kNumStreams) * int64_t(cuda::kCublasWorkspaceBytes);
    for (const BufferDesc& b : schedule.buffers) {
      const cuda::Elt elt = cuda::storage_elt(dev_.options, schedule.model, b.role);
      bytes += b.elements() * cuda::elt_bytes(elt);
      if (b.role == BufferRole::Param && elt != cuda::Elt::F32) bytes += b.elements() * int64_t(sizeof(float));
    }
    return bytes;
  }

  cuda::DeviceState dev_;
};

}  // namespace

int cuda_device_of(int local_rank, int count) { return local_rank % count; }

int cuda_device_count(std::string* why) {
  int n = 0;
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    if (why) *why = cudaGetErrorString(rc);
    cudaGetLastError();  // clear the sticky error so later calls report their own
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device is visible";
  return n;
}

std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& options) {
  return std::make_unique<CudaBackend>(options);
}

std::function<std::unique_ptr<Backend>()> add_cuda_backend_flags(CLI::App& app) {
  auto o = std::make_shared<CudaOptions>();
  app.add_flag("--emulate-comm", o->emulate_comm,
               "cuda: every collective becomes a paced kernel moving a ring AllReduce's bytes (one GPU)");
  app.add_option("--emulate-tp", o->emulate_tp, "cuda --emulate-comm: TP degree whose ring traffic is moved (default 8)")
      ->check(number_at_least(1, true));
  app.add_option("--emulate-sms", o->emulate_sms, "cuda --emulate-comm: SMs the emulated collective occupies (default 16)")
      ->check(number_at_least(1, true));
  app.add_option("--emulate-busbw", o->emulate_busbw_gbps,
                 "cuda --emulate-comm: bus bandwidth in GB/s it is paced to (default 370, H100 NVLink)")
      ->check(number_at_least(0, false));
  app.add_option("--emulate-latency-us", o->emulate_latency_us,
                 "cuda --emulate-comm: latency added to every emulated collective (default 10, NCCL on NVLink)")
      ->check(number_at_least(0, true));
  app.add_option("--cuda-dtype", o->dtype, "cuda: storage type: model (default), bf16, fp16, fp32")
      ->check(CLI::IsMember({"model", "bf16", "fp16", "fp32"}));
  app.add_option_function<std::string>(
         "--cuda-comm-priority", [o](const std::string& v) { o->comm_high_priority = v == "high"; },
         "cuda: priority of the communication stream: high (default; its collectives take SMs ahead of a "
         "running GEMM's pending blocks) or normal (the compute stream's)")
      ->check(CLI::IsMember({"high", "normal"}));
  return [o] { return make_cuda_backend(*o); };
}

}  // namespace domino
