// op_bench.hpp: one probe made runnable on the host: its buffers allocated and initialised as the CPU
// backend does (param_init), activations filled with small random values, and run through run_cpu_op.
#pragma once

#include <cstdint>
#include <vector>

#include "executor/cpu/cpu_ops.hpp"
#include "sim/ir/schedule.hpp"

namespace domino::prof {

class OpBench {
 public:
  // copies > 1: that many sets of buffers, used in turn, so that a memory-bound op finds its data out of
  // cache as it does in a training step (where other ops ran in between), not warm from the last repeat.
  OpBench(const Schedule& mini, uint64_t seed, int copies = 1);
  ~OpBench();
  OpBench(const OpBench&) = delete;
  OpBench& operator=(const OpBench&) = delete;

  void run() {
    ctx_.buffers = sets_[next_];
    next_ = (next_ + 1) % sets_.size();
    run_cpu_op(schedule_.ops.front(), ctx_);
  }
  const Op& op() const { return schedule_.ops.front(); }

 private:
  const Schedule& schedule_;
  CpuOpContext ctx_;
  std::vector<std::vector<float*>> sets_;
  size_t next_ = 0;
  std::vector<float*> owned_;
};

}  // namespace domino::prof
