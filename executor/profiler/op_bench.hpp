// op_bench.hpp: one probe made runnable on the host: its buffers allocated and initialised as the CPU
// backend does (param_init), activations filled with small random values, and run through run_cpu_op.
#pragma once

#include <cstdint>
#include <vector>

#include "executor/cpu/cpu_ops.hpp"
#include "sim/schedule.hpp"

namespace domino::prof {

class OpBench {
 public:
  OpBench(const Schedule& mini, uint64_t seed);
  ~OpBench();
  OpBench(const OpBench&) = delete;
  OpBench& operator=(const OpBench&) = delete;

  void run() { run_cpu_op(schedule_.ops.front(), ctx_); }
  const Op& op() const { return schedule_.ops.front(); }

 private:
  const Schedule& schedule_;
  CpuOpContext ctx_;
  std::vector<float*> owned_;
};

}  // namespace domino::prof
