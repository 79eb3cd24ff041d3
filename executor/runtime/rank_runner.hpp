// rank_runner.hpp: runs the iterations of one rank: one worker thread per stream of the schedule, each
// taking its stream's ops in program order and waiting for cross-stream deps on per-op completion flags
// (C++20 atomic wait; with WorkerWait::Spin a short poll first). Every iteration starts right after a barrier
// across the ranks. IterationRunner runs one iteration at a time (domino-exec --plans alternates several of
// them in one launch); run_iterations runs a whole single-plan run.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "executor/runtime/backend.hpp"
#include "executor/runtime/cpu_placement.hpp"

namespace domino {

class GlooComm;

struct RunnerOptions {
  int warmup = 2;             // untimed iterations first
  int iters = 5;              // timed iterations
  bool check_finite = true;   // scan every op's outputs for NaN/Inf after it ran (outside its span)
  int dump_iter = -1;         // iteration (0-based, warm-up included) whose tensors go to dump_dir
  std::string dump_dir;       // files land in dump_dir/rank<r>/
  int compute_cpu = -1;       // >= 0: the compute stream's worker runs on this CPU only (cpu_placement.hpp)
  WorkerWait wait = WorkerWait::Block;  // how workers wait for other streams' ops and the caller for them
  // In a SCHED_FIFO rank (--realtime) the compute worker runs under the normal policy (cpu_placement.hpp).
  bool compute_leaves_realtime = false;
};

struct IterationRecord {
  bool timed = false;
  double time_us = 0;            // end of this rank's last op, from the iteration start
  float loss = 0;                // the CrossEntropy op's output (NaN when the schedule has none)
  double start_us = 0;           // when the iteration started (after its barrier), steady clock, microseconds:
                                 // comparable between the plans of one launch (not between machines)
  std::vector<OpTiming> spans;   // every op of the schedule, in no particular order
};

struct RankResult {
  int rank = 0;
  std::vector<IterationRecord> iterations;  // warm-up and timed, in order
  int64_t peak_memory_bytes = 0;
  int64_t huge_page_bytes = -1;  // Backend::huge_page_bytes
  // Ranks with the same (non-empty) domain read one steady clock, so their iterations' start_us compare
  // (steady_clock_domain()).
  std::string clock_domain;
};

// The steady clock this process reads, named: the host's boot id and the process's time namespace (both
// shift CLOCK_MONOTONIC, which std::chrono::steady_clock reads on Linux). Empty where either is unknown.
std::string steady_clock_domain();

// One plan's iterations, one at a time: verifies the schedule (verify_schedule of sim/ir/verify.hpp: BadInput
// naming the op) and starts one worker thread per stream on construction; each run_next() is one iteration
// (a barrier across the ranks first when comm is set, then the backend's begin_iteration with the next
// optimizer step). Several runners may live on one rank; they run only one at a time. Throws domino::Error
// naming the rank and op on any failure; the workers are joined when the runner is destroyed.
class IterationRunner {
 public:
  IterationRunner(const Schedule& schedule, Backend& backend, GlooComm* comm, int rank, const RunnerOptions& options);
  ~IterationRunner();
  IterationRunner(const IterationRunner&) = delete;
  IterationRunner& operator=(const IterationRunner&) = delete;

  // Runs the next iteration (0-based count of those run so far: dumps follow options.dump_iter).
  IterationRecord run_next(bool timed);

 private:
  class Workers;
  const Schedule& schedule_;
  Backend& backend_;
  GlooComm* comm_;
  int rank_;
  RunnerOptions options_;
  std::unique_ptr<Workers> workers_;
  const Op* loss_ = nullptr;  // the CrossEntropy op, when the schedule has one
  int iterations_run_ = 0;
};

// Runs warmup + iters iterations of `schedule` on a prepared backend. comm may be null for a single rank.
// on_iteration (optional) is called on the calling thread after each iteration. Throws domino::Error
// naming the rank and op on any failure (NaN/Inf, a collective that failed, a kernel error); first verifies
// the schedule (verify_schedule of sim/ir/verify.hpp: BadInput naming the op).
RankResult run_iterations(const Schedule& schedule, Backend& backend, GlooComm* comm, int rank,
                          const RunnerOptions& options,
                          const std::function<void(int iteration, const IterationRecord&)>& on_iteration = {});

}  // namespace domino
