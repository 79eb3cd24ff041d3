// grad_check.hpp: domino-exec --check. Runs the plan, the megatron-sync plan at the same TP degree and a
// megatron-sync run at tp=1, one iteration each from the same seed; assembles every parameter gradient into
// its full tensor (shard_of) and compares loss and gradients (float32: max relative error <= 1e-5); the
// copies of a replicated gradient must also agree between the plan's ranks. Activations are never compared
// (a sequence-sharded one differs in shape and row order from megatron-sync's), except to name, on a
// mismatch, the first op in the plan's program order that writes a buffer differing from megatron-sync's
// buffer of the same name and shape.
#pragma once

#include <string>
#include <vector>

#include "executor/job/exec_options.hpp"
#include "executor/job/job.hpp"
#include "executor/runtime/tensor_dump.hpp"

namespace domino {

constexpr double kCheckTolerance = 1e-5;

// max_i |a_i - b_i| / max(|b_i|, floor), floor = kRelativeFloor * max_i |b_i|; 0 for identical tensors.
// Why the floor is the tensor's full scale: fp32 rounding of a gradient element is proportional to the
// magnitude of the terms summed into it (about the tensor's scale), not to the possibly cancelled result.
// Measured on cpu-gpt between tp=1 and tp=2 (different GEMM k-splits and AllReduce order): errors of about
// 1e-6 of the tensor's max everywhere, but up to 5e-4 of |b_i| on elements 1000x smaller than the max.
// A real slicing bug (a missing or doubled slice, a wrong region) is off by O(1) of the scale.
constexpr double kRelativeFloor = 1.0;
double max_relative_error(const std::vector<float>& a, const std::vector<float>& b);

// One parameter gradient assembled from every rank's shard into the full [rows, cols] tensor.
// Throws when an element of the full tensor is covered by no rank (broken sharding).
std::vector<float> assemble_full(const Job& job, int32_t grad_buffer, const std::vector<RankSnapshot>& ranks);

// The largest difference (max_relative_error's measure) between two ranks' copies of an element of a
// parameter gradient that several ranks hold (norm gains and biases, replicated parameters): 0 when every
// copy agrees or no element is replicated. Under sequence parallelism each rank first holds partial sums of
// those gradients; only the schedule's AllReduce of them makes the copies agree.
double replica_disagreement(const Job& job, int32_t grad_buffer, const std::vector<RankSnapshot>& ranks);

// Runs the three launches and compares; prints the table. Returns 0 when everything matches, else throws
// domino::Error (Runtime) naming the worst tensor and the first differing op.
int run_gradient_check(const ExecOptions& options, const Job& job);

}  // namespace domino
