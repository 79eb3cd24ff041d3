// probe_runner.hpp: one probe schedule (probe_schedule.hpp) on a backend made by name (executor/job
// backends.hpp) and prepared for it, run through the runtime's per-stream workers (rank_runner.hpp): the
// same StreamDriver calls as a domino-exec training step, so op times are device events on CUDA and the
// host clock on the CPU.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "executor/runtime/backend.hpp"
#include "executor/runtime/rank_runner.hpp"
#include "sim/fit/stats.hpp"

namespace domino::prof {

// How often a probe is repeated: warm-up runs, then repeats until enough time was measured.
struct RepeatPolicy {
  int warmup = 2;
  int min_repeats = 5;
  int max_repeats = 40;
  double min_total_us = 50'000;  // keep repeating until this much time was measured (or max_repeats)
};
// Runs fn warmup times untimed, then repeats it timing each run with steady_clock.
std::vector<double> time_repeats(const std::function<void()>& fn, const RepeatPolicy& policy);

class PreparedProbe {
 public:
  // Makes the backend and prepares it for `schedule` with `ctx` (collectives: ctx.comm is the rank's group).
  // compute_leaves_realtime: in a SCHED_FIFO rank (domino-profile --realtime) the compute stream's worker
  // runs under the normal policy, as domino-exec --realtime runs it.
  PreparedProbe(const std::string& backend, Schedule schedule, const RankContext& ctx,
                bool compute_leaves_realtime);
  PreparedProbe(const PreparedProbe&) = delete;  // the backend keeps the schedule's address
  PreparedProbe& operator=(const PreparedProbe&) = delete;
  ~PreparedProbe();

  const Schedule& schedule() const { return schedule_; }
  // warmup + iters iterations, each right after a barrier on `barrier_comm` (null: none); returns the op
  // timings of the timed iterations. Every rank must call it with the same counts.
  std::vector<std::vector<OpTiming>> run(int warmup, int iters, GlooComm* barrier_comm);
  // Iterations as `policy` decides (warm-up, then repeats until enough time was measured: stats.hpp), each
  // rank on its own. Returns the durations of the ops of the timed iterations; in a chain of several ops
  // the first is left out (it starts from an idle device queue).
  std::vector<double> time_ops(const RepeatPolicy& policy);

 private:
  RunnerOptions options(int warmup, int iters) const;

  Schedule schedule_;
  std::unique_ptr<Backend> backend_;
  int rank_ = 0;
  bool compute_leaves_realtime_ = false;
};

// Duration of an op's timing in microseconds.
inline double duration_us(const OpTiming& t) { return t.end_us - t.start_us; }

}  // namespace domino::prof
