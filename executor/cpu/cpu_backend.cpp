// cpu_backend.cpp: the CPU backend. Every buffer lives in one arena allocated once in prepare()
// (cpu_arena.hpp); compute ops run through run_cpu_op (executor/cpu), collectives through run_cpu_collective
// over the rank's GlooComm. A stream driver runs each op to completion on its worker thread and times it with
// steady_clock.
#include "executor/cpu/cpu_backend.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <utility>

#include "executor/cpu/cpu_arena.hpp"
#include "executor/cpu/cpu_collectives.hpp"
#include "executor/cpu/cpu_ops.hpp"
#include "executor/runtime/param_init.hpp"
#include "sim/base/error.hpp"

namespace domino {
namespace {

constexpr int64_t kAlignFloats = 16;  // 64-byte aligned buffers

// The arena's layout: every buffer's offset in floats; returns the arena's size in bytes.
int64_t arena_layout(const Schedule& schedule, std::vector<int64_t>* offsets) {
  int64_t floats = 0;
  for (const BufferDesc& b : schedule.buffers) {
    if (offsets) offsets->push_back(floats);
    floats += (b.elements() + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  }
  return std::max<int64_t>(floats, kAlignFloats) * int64_t(sizeof(float));
}

// Varied finite values in [-1, 1] from a xorshift stream: a profiler probe's parameters need no more
// (RankContext::reproducible_values), and its cold buffer sets take a hundred MiB or more, too many elements
// to draw through initial_values' per-element hash for every probe.
void fill_varied(float* out, int64_t elements, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (int64_t i = 0; i < elements; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    out[i] = float(int64_t(x >> 40) - (int64_t(1) << 23)) * (1.0f / float(int64_t(1) << 23));
  }
}

// Bytes of the staging arrays the stream drivers keep for their collectives.
int64_t staging_bytes(const Schedule& schedule) {
  int64_t floats = 0;
  for (Stream s : {Stream::Compute, Stream::Comm}) floats += collective_staging_floats(schedule, s);
  return floats * int64_t(sizeof(float));
}

// The kernel's estimate of the memory new work can take without swapping; -1 when it cannot be read.
int64_t mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return -1;
}

class CpuBackend;

class CpuStreamDriver final : public StreamDriver {
 public:
  CpuStreamDriver(CpuBackend& backend, int64_t staging_floats) : backend_(backend), collectives_(staging_floats) {}
  void begin_iteration(SteadyClock::time_point t0) override {
    t0_ = t0;
    timings_.clear();
  }
  void wait_for(const Op&) override {}  // the dep ran to completion before it was marked issued
  void issue(const Op& op) override;
  std::vector<OpTiming> finish_iteration() override { return std::move(timings_); }

 private:
  double since_start(SteadyClock::time_point t) const {
    return std::chrono::duration<double, std::micro>(t - t0_).count();
  }
  CpuBackend& backend_;
  SteadyClock::time_point t0_;
  std::vector<OpTiming> timings_;
  CpuCollectiveState collectives_;  // staging and Gloo's set-up collectives (cpu_collectives.hpp)
  friend class CpuBackend;
};

class CpuBackend final : public Backend {
 public:
  ~CpuBackend() override {
    if (arena_ && !rank_.reproducible_values)
      keep_spare_arena(arena_, arena_block_bytes_);
    else
      release_arena(arena_);
  }
  std::string name() const override { return "cpu"; }
  TimingMode timing_mode() const override { return TimingMode::HostClock; }
  bool scans_for_nan_by_default() const override { return true; }  // a host scan costs little next to the op

  void prepare(const Schedule& schedule, const RankContext& ctx) override {
    schedule_ = &schedule;
    rank_ = ctx;
    Eigen::setNbThreads(std::max(1, ctx.threads));
    std::vector<int64_t> offsets;
    arena_bytes_ = arena_layout(schedule, &offsets);
    arena_ = ctx.reproducible_values ? allocate_arena(arena_bytes_, &arena_block_bytes_)
                                     : take_spare_arena(arena_bytes_, &arena_block_bytes_);
    if (!arena_)
      throw_runtime("rank " + std::to_string(ctx.rank) + ": cannot allocate " + std::to_string(arena_bytes_) +
                    " bytes for the buffers");
    ops_ctx_.schedule = &schedule;
    ops_ctx_.hyper = ctx.hyper;
    ops_ctx_.rank = ctx.rank;
    ops_ctx_.buffers.clear();
    for (size_t i = 0; i < schedule.buffers.size(); ++i) {
      float* p = arena_ + offsets[i];
      if (!ctx.reproducible_values && schedule.buffers[i].role == BufferRole::Param)
        fill_varied(p, schedule.buffers[i].elements(), ctx.seed * 1000003u + i);
      else
        initial_values(schedule, int32_t(i), ctx.rank, ctx.seed, p);
      ops_ctx_.buffers.push_back(p);
    }
    // Every page is touched by now. Profiler probes (hundreds, on one reused block) do not report it.
    if (ctx.reproducible_values) huge_page_bytes_ = resident_huge_page_bytes(arena_, arena_bytes_);
  }

  void reserve_for_plans(const std::vector<const Schedule*>& schedules) override {
    int64_t bytes = 0;
    for (const Schedule* s : schedules)
      if (const int64_t b = arena_layout(*s, nullptr); b >= kHugePageBytes) bytes += arena_block_bytes(b);
    reserve_arena_pool(bytes);
  }

  std::unique_ptr<StreamDriver> make_stream_driver(Stream stream) override {
    auto driver = std::make_unique<CpuStreamDriver>(*this, collective_staging_floats(*schedule_, stream));
    set_up_cpu_collectives(*schedule_, stream, collective_context(), driver->collectives_);
    return driver;
  }
  void begin_iteration(int64_t step) override { ops_ctx_.step = step; }

  std::vector<float> read_region(const Region& r) override {
    const BufferDesc& b = schedule_->buffers.at(r.buffer);
    std::vector<float> out;
    out.reserve(size_t(r.elements()));
    const float* base = ops_ctx_.buffers[r.buffer];
    for (int64_t bi = r.b0; bi < r.b1; ++bi)
      for (int64_t s = r.s0; s < r.s1; ++s) {
        const float* row = base + (bi * b.seq + s) * b.cols;
        out.insert(out.end(), row + r.c0, row + r.c1);
      }
    return out;
  }

  int64_t peak_memory_bytes() const override { return arena_bytes_; }
  int64_t huge_page_bytes() const override { return huge_page_bytes_; }
  // Every rank of the host draws on the machine's memory; each keeps `threads` cores computing.
  HostFootprint host_footprint(const Schedule& schedule, int threads, const HostRanks& ranks) const override {
    HostFootprint f;
    f.bytes_per_rank = arena_layout(schedule, nullptr) + staging_bytes(schedule);
    f.busy_threads_per_rank = std::max(1, threads);
    if (const int64_t available = mem_available_bytes(); available >= 0)
      f.pools.push_back({"this machine", "available (MemAvailable)", available, ranks.local_ranks});
    return f;
  }
  // fp32 math; ops take milliseconds, so one op per sample and a generous time per probe.
  ProfilingTraits profiling_traits() const override {
    return {.gemm_dtype = DType::FP32, .min_chain = 1, .probe_budget_us = 600'000};
  }

  void run(const Op& op, CpuStreamDriver& driver) {
    if (!collective(kind_of(op.code))) return run_cpu_op(op, ops_ctx_);
    run_cpu_collective(op, collective_context(), driver.collectives_);
  }

 private:
  CpuCollectiveContext collective_context() const {
    return {&ops_ctx_, rank_.comm, rank_.world, rank_.link_latency_us};
  }

  const Schedule* schedule_ = nullptr;
  RankContext rank_;
  CpuOpContext ops_ctx_;
  float* arena_ = nullptr;
  int64_t arena_bytes_ = 0;
  int64_t arena_block_bytes_ = 0;  // the allocation's size: a probe's arena may reuse a larger block
  int64_t huge_page_bytes_ = -1;
};

void CpuStreamDriver::issue(const Op& op) {
  const auto start = SteadyClock::now();
  backend_.run(op, *this);
  const auto end = SteadyClock::now();
  timings_.push_back({op.index, since_start(start), since_start(end)});
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace domino
