// rank_runner.cpp: the per-rank runtime (see rank_runner.hpp). Completion flags hold the number of the last
// iteration in which the op was issued, so they never need clearing; a failure stores a sentinel into every
// flag to wake all waiters, which then see `failed_` and stop.
#include "executor/runtime/rank_runner.hpp"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

#include "executor/runtime/gloo_comm.hpp"
#include "executor/runtime/tensor_dump.hpp"
#include "sim/base/error.hpp"
#include "sim/ir/verify.hpp"

namespace domino {
namespace {

struct Aborted {};  // another worker failed: stop quietly

class StreamWorkers {
 public:
  StreamWorkers(const Schedule& s, Backend& backend, int rank, const RunnerOptions& options)
      : s_(s), backend_(backend), rank_(rank), options_(options), issued_(new std::atomic<int64_t>[s.ops.size()]) {
    for (size_t i = 0; i < s.ops.size(); ++i) issued_[i].store(0);
    for (int st = 0; st < kNumStreams; ++st) {
      std::vector<int32_t> ops;
      for (const Op& op : s.ops)
        if (int(op.stream) == st) ops.push_back(op.index);
      if (ops.empty()) continue;
      lanes_.push_back({Stream(st), ops, backend.make_stream_driver(Stream(st)), {}});
    }
    for (Lane& lane : lanes_) threads_.emplace_back([this, &lane] { work(lane); });
  }

  ~StreamWorkers() {
    go_.store(-1);
    go_.notify_all();
    for (auto& t : threads_) t.join();
  }

  SteadyClock::time_point started_at() const { return t0_; }

  // Runs one iteration on every stream; returns the timings of all ops.
  std::vector<OpTiming> run(int64_t iteration) {
    t0_ = SteadyClock::now();
    go_.store(iteration, std::memory_order_release);
    go_.notify_all();
    const int64_t target = iteration * int64_t(lanes_.size());
    for (int64_t d = done_.load(std::memory_order_acquire); d < target; d = done_.load(std::memory_order_acquire))
      wait_while(done_, d);
    if (failed_.load()) std::rethrow_exception(error_);
    std::vector<OpTiming> all;
    for (Lane& lane : lanes_) all.insert(all.end(), lane.timings.begin(), lane.timings.end());
    return all;
  }

 private:
  struct Lane {
    Stream stream;
    std::vector<int32_t> ops;
    std::unique_ptr<StreamDriver> driver;
    std::vector<OpTiming> timings;
  };

  void work(Lane& lane) {
    bool attached = false;
    for (int64_t seen = 0;;) {
      go_.wait(seen, std::memory_order_acquire);
      const int64_t iteration = go_.load(std::memory_order_acquire);
      if (iteration < 0) return;
      seen = iteration;
      try {
        if (!attached) {
          if (lane.stream == Stream::Compute) {
            pin_calling_thread(options_.compute_cpu);
            if (options_.compute_leaves_realtime) leave_realtime();
          }
          lane.driver->attach_thread();
        }
        attached = true;
        run_lane(lane, iteration);
      } catch (const Aborted&) {
      } catch (...) {
        fail(std::current_exception());
      }
      done_.fetch_add(1, std::memory_order_acq_rel);
      done_.notify_all();
    }
  }

  void run_lane(Lane& lane, int64_t iteration) {
    StreamDriver& driver = *lane.driver;
    driver.begin_iteration(t0_);
    const bool dumping = options_.dump_iter >= 0 && iteration - 1 == options_.dump_iter;
    for (int32_t index : lane.ops) {
      const Op& op = s_.ops[size_t(index)];
      for (int32_t dep : op.deps) {
        wait_issued(dep, iteration);
        driver.wait_for(s_.ops[size_t(dep)]);
      }
      driver.issue(op);
      if (options_.check_finite || dumping) {
        driver.synchronize();
        if (options_.check_finite) check_outputs(op, iteration);
        if (dumping) dump_outputs(op);
      }
      issued_[size_t(index)].store(iteration, std::memory_order_release);
      issued_[size_t(index)].notify_all();
    }
    lane.timings = driver.finish_iteration();
  }

  void wait_issued(int32_t dep, int64_t iteration) {
    std::atomic<int64_t>& flag = issued_[size_t(dep)];
    for (;;) {
      if (failed_.load(std::memory_order_acquire)) throw Aborted{};
      const int64_t v = flag.load(std::memory_order_acquire);
      if (v >= iteration) return;
      wait_while(flag, v);
    }
  }

  // Returns once `flag` may differ from `seen` (spurious returns allowed: callers re-check). WorkerWait::Spin
  // polls first, so that a dependency finishing within microseconds costs no futex wake-up and reschedule.
  void wait_while(const std::atomic<int64_t>& flag, int64_t seen) const {
    if (options_.wait == WorkerWait::Spin) {
      const auto until = SteadyClock::now() + std::chrono::microseconds(kSpinBeforeBlockUs);
      do {
        for (int i = 0; i < 64; ++i) {
          if (flag.load(std::memory_order_acquire) != seen) return;
          cpu_relax();
        }
      } while (SteadyClock::now() < until);
    }
    flag.wait(seen, std::memory_order_acquire);
  }

  void check_outputs(const Op& op, int64_t iteration) {
    for (int i = 0; i < op.n_out; ++i) {
      if (!op.out[size_t(i)].valid() || backend_.region_finite(op.out[size_t(i)])) continue;
      throw_runtime("rank " + std::to_string(rank_) + ": NaN or Inf in output " + std::to_string(i) + " (" +
                    s_.buffers.at(op.out[size_t(i)].buffer).name + ") of op " + op_id(op) + " in iteration " +
                    std::to_string(iteration - 1) + " (use a smaller learning rate, or --no-nan-check to run on)");
    }
  }

  void dump_outputs(const Op& op) {
    const std::string dir = options_.dump_dir + "/rank" + std::to_string(rank_) + "/";
    for (int i = 0; i < op.n_out; ++i) {
      const Region& r = op.out[size_t(i)];
      if (!r.valid()) continue;
      write_npy(dir + op_id(op) + ".out" + std::to_string(i) + ".npy", npy_shape(s_, r), backend_.read_region(r));
    }
  }

  void fail(std::exception_ptr e) {
    {
      std::lock_guard lock(error_mutex_);
      if (!error_) error_ = e;
    }
    failed_.store(true, std::memory_order_release);
    for (size_t i = 0; i < s_.ops.size(); ++i) {
      issued_[i].store(std::numeric_limits<int64_t>::max(), std::memory_order_release);
      issued_[i].notify_all();
    }
  }

  const Schedule& s_;
  Backend& backend_;
  int rank_;
  RunnerOptions options_;
  std::unique_ptr<std::atomic<int64_t>[]> issued_;
  std::vector<Lane> lanes_;
  std::vector<std::thread> threads_;
  SteadyClock::time_point t0_;  // written before go_ is released
  std::atomic<int64_t> go_{0};
  std::atomic<int64_t> done_{0};
  std::atomic<bool> failed_{false};
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

const Op* loss_op(const Schedule& s) {
  for (const Op& op : s.ops)
    if (op.code == OpCode::CrossEntropy) return &op;
  return nullptr;
}

void dump_start_of_iteration(const Schedule& s, Backend& backend, int rank, const std::string& dump_dir) {
  const std::string dir = dump_dir + "/rank" + std::to_string(rank) + "/";
  std::filesystem::create_directories(dir);
  for (size_t i = 0; i < s.buffers.size(); ++i) {
    const BufferDesc& b = s.buffers[i];
    if (b.role != BufferRole::Param && b.role != BufferRole::Data) continue;
    const Region r = whole_buffer(s, int32_t(i));
    write_npy(dir + b.name + ".npy", npy_shape(s, r), backend.read_region(r));
  }
}

}  // namespace

class IterationRunner::Workers : public StreamWorkers {
 public:
  using StreamWorkers::StreamWorkers;
};

IterationRunner::IterationRunner(const Schedule& schedule, Backend& backend, GlooComm* comm, int rank,
                                 const RunnerOptions& options)
    : schedule_(schedule), backend_(backend), comm_(comm), rank_(rank), options_(options) {
  // Every backend runs only verified schedules: a malformed op fails here, naming it, before any kernel or
  // per-op flag (indexed by op index and dependency) touches memory.
  verify_schedule(schedule);
  workers_ = std::make_unique<Workers>(schedule, backend, rank, options);
  loss_ = loss_op(schedule);
}

IterationRunner::~IterationRunner() = default;

IterationRecord IterationRunner::run_next(bool timed) {
  const int it = iterations_run_;
  if (it == options_.dump_iter) dump_start_of_iteration(schedule_, backend_, rank_, options_.dump_dir);
  if (comm_) comm_->barrier("barrier before iteration " + std::to_string(it));
  backend_.begin_iteration(it + 1);
  IterationRecord rec;
  rec.timed = timed;
  rec.spans = workers_->run(it + 1);
  rec.start_us = std::chrono::duration<double, std::micro>(workers_->started_at().time_since_epoch()).count();
  for (const OpTiming& t : rec.spans) rec.time_us = std::max(rec.time_us, t.end_us);
  rec.loss = loss_ ? backend_.read_region(loss_->out[0]).at(0) : std::numeric_limits<float>::quiet_NaN();
  ++iterations_run_;
  return rec;
}

std::string steady_clock_domain() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!std::getline(boot, id) || id.empty()) return {};
  // Kernels without time namespaces have no such link, and nothing can shift their monotonic clock.
  std::error_code ec;
  const std::filesystem::path ns = std::filesystem::read_symlink("/proc/self/ns/time", ec);
  return id + " " + (ec ? std::string("no time namespace") : ns.string());
}

RankResult run_iterations(const Schedule& schedule, Backend& backend, GlooComm* comm, int rank,
                          const RunnerOptions& options,
                          const std::function<void(int, const IterationRecord&)>& on_iteration) {
  if (options.warmup < 0 || options.iters < 1)
    throw_bad_input("--warmup must be >= 0 and --iters >= 1 (got " + std::to_string(options.warmup) + ", " +
                    std::to_string(options.iters) + ")");
  RankResult result;
  result.rank = rank;
  result.clock_domain = steady_clock_domain();
  // Workers are destroyed (joined) before an error leaves this function.
  IterationRunner runner(schedule, backend, comm, rank, options);
  result.peak_memory_bytes = backend.peak_memory_bytes();
  result.huge_page_bytes = backend.huge_page_bytes();
  const int total = options.warmup + options.iters;
  for (int it = 0; it < total; ++it) {
    IterationRecord rec = runner.run_next(it >= options.warmup);
    if (on_iteration) on_iteration(it, rec);
    result.iterations.push_back(std::move(rec));
  }
  return result;
}

}  // namespace domino
