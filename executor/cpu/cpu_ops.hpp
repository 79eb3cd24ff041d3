// cpu_ops.hpp: the CPU backend's math: runs one compute op of the schedule IR on fp32 buffers.
// The runtime (processes, streams, collectives) owns the buffers and calls run_cpu_op in program order;
// everything here is single-threaded and stateless apart from small per-thread scratch.
#pragma once

#include <cstdint>
#include <vector>

#include "executor/runtime/optimizer_settings.hpp"
#include "sim/ir/schedule.hpp"

namespace domino {

struct CpuOpContext {
  const Schedule* schedule = nullptr;
  std::vector<float*> buffers;  // one per schedule->buffers[i]: elements() floats, row-major [batch][seq][cols]
  OptimizerHyper hyper;
  int64_t step = 1;  // 1-based optimizer step (Adam bias correction)
  int rank = 0;      // rank in the tensor-parallel group: which vocabulary shard the vocab-parallel ops see
};

// Runs one compute op (every OpCode except the collectives, which throw: see cpu_collectives.hpp) on fp32
// data. Throws domino::Error (runtime) naming op_id(op) on a malformed op (region out of bounds, wrong arity).
void run_cpu_op(const Op& op, const CpuOpContext& ctx);

}  // namespace domino
