// probe_runner.cpp: preparing and running one probe schedule (see probe_runner.hpp).
#include "executor/profiler/probe_runner.hpp"

#include <chrono>

#include "executor/job/backends.hpp"

namespace domino::prof {

std::vector<double> time_repeats(const std::function<void()>& fn, const RepeatPolicy& policy) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < policy.warmup; ++i) fn();
  std::vector<double> samples;
  double total = 0;
  while (int(samples.size()) < policy.max_repeats &&
         (int(samples.size()) < policy.min_repeats || total < policy.min_total_us)) {
    const auto t0 = Clock::now();
    fn();
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    samples.push_back(us);
    total += us;
  }
  return samples;
}

PreparedProbe::PreparedProbe(const std::string& backend, Schedule schedule, const RankContext& ctx,
                             bool compute_leaves_realtime)
    : schedule_(std::move(schedule)),
      backend_(make_backend(backend)),
      rank_(ctx.rank),
      compute_leaves_realtime_(compute_leaves_realtime) {
  RankContext probe_ctx = ctx;
  probe_ctx.reproducible_values = false;  // only the time counts
  backend_->prepare(schedule_, probe_ctx);
}

PreparedProbe::~PreparedProbe() = default;

RunnerOptions PreparedProbe::options(int warmup, int iters) const {
  RunnerOptions options;
  options.warmup = warmup;
  options.iters = iters;
  options.check_finite = false;  // a probe's values are not a training run's: only its time counts
  options.compute_leaves_realtime = compute_leaves_realtime_;
  return options;
}

std::vector<std::vector<OpTiming>> PreparedProbe::run(int warmup, int iters, GlooComm* barrier_comm) {
  const RankResult result = run_iterations(schedule_, *backend_, barrier_comm, rank_, options(warmup, iters));
  std::vector<std::vector<OpTiming>> timed;
  for (const IterationRecord& it : result.iterations)
    if (it.timed) timed.push_back(it.spans);
  return timed;
}

std::vector<double> PreparedProbe::time_ops(const RepeatPolicy& policy) {
  // One set of stream workers for every repeat, as a training run keeps its workers: a worker started per
  // repeat paid its first allocations (a new thread's malloc arena, Eigen's packing buffers, the kernels'
  // scratch) inside the op, which made a GEMM of a few microseconds measure 0.2-0.6 ms.
  IterationRunner runner(schedule_, *backend_, nullptr, rank_, options(0, 1));
  std::vector<double> durations;
  int calls = 0;
  time_repeats(
      [&] {
        const IterationRecord rec = runner.run_next(true);
        if (calls++ < policy.warmup) return;
        for (const OpTiming& t : rec.spans)
          if (rec.spans.size() == 1 || t.op != 0) durations.push_back(duration_us(t));
      },
      policy);
  return durations;
}

}  // namespace domino::prof
