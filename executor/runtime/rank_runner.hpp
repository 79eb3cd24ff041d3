// rank_runner.hpp: runs the iterations of one rank: one worker thread per stream of the schedule, each
// taking its stream's ops in program order and waiting for cross-stream deps on per-op completion flags
// (C++20 atomic wait: no spinning). Every iteration starts right after a barrier across the ranks.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "executor/runtime/backend.hpp"

namespace domino {

class GlooComm;

struct RunnerOptions {
  int warmup = 2;             // untimed iterations first
  int iters = 5;              // timed iterations
  bool check_finite = true;   // scan every op's outputs for NaN/Inf after it ran (outside its span)
  int dump_iter = -1;         // iteration (0-based, warm-up included) whose tensors go to dump_dir
  std::string dump_dir;       // files land in dump_dir/rank<r>/
};

struct IterationRecord {
  bool timed = false;
  double time_us = 0;            // end of this rank's last op, from the iteration start
  float loss = 0;                // the CrossEntropy op's output (NaN when the schedule has none)
  std::vector<OpTiming> spans;   // every op of the schedule, in no particular order
};

struct RankResult {
  int rank = 0;
  std::vector<IterationRecord> iterations;  // warm-up and timed, in order
  int64_t peak_memory_bytes = 0;
};

// Runs warmup + iters iterations of `schedule` on a prepared backend. comm may be null for a single rank.
// on_iteration (optional) is called on the calling thread after each iteration. Throws domino::Error
// naming the rank and op on any failure (NaN/Inf, a collective that failed, a kernel error); first verifies
// the schedule (verify_schedule of sim/ir/verify.hpp: BadInput naming the op).
RankResult run_iterations(const Schedule& schedule, Backend& backend, GlooComm* comm, int rank,
                          const RunnerOptions& options,
                          const std::function<void(int iteration, const IterationRecord&)>& on_iteration = {});

}  // namespace domino
