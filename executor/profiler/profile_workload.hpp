// profile_workload.hpp: WHAT the profiler measures. Each probe is one op of the schedule IR in a one-op
// schedule of its own ("mini schedule"), so it runs through exactly the kernels and buffer layouts the
// executor uses: GEMMs of a size grid (or, with --for MODEL, every GEMM shape that model's plans emit, for
// every p and q), memory-bound ops and attention cut from real schedules at several sizes, message sizes of the
// collectives (AllReduce, and the sequence-parallel AllGather and ReduceScatter at the same full sizes).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "sim/ir/schedule.hpp"

namespace domino::prof {

struct Probe {
  std::string label;     // unique: "gemm 1024x576x384 matmul", "norm 1572864B layernorm_fwd", ...
  const Schedule* mini;  // one-op schedule (owned by the Workload)
  const Op& op() const { return mini->ops.front(); }
};

struct Workload {
  std::deque<Schedule> schedules;  // stable addresses for Probe::mini
  std::vector<Probe> gemms;        // distinct (m, n, k, opcode, row blocks)
  std::vector<Probe> memory_ops;   // norm, activation, elementwise, copy, optimizer, embedding, loss
  std::vector<Probe> attention;    // AttnFwd / AttnBwd over seq_len, heads per rank and slices
  std::vector<double> allreduce_bytes;  // ascending, distinct; also the AllGather / ReduceScatter full sizes
  std::optional<Probe> interference_gemm;
  double interference_bytes = 0;
  std::string model_name;          // the --for models, or the built-in CPU model used for op shapes
};

struct WorkloadOptions {
  std::vector<ModelSpec> models;   // --for MODEL[,MODEL...]: their GEMM shapes and AllReduce sizes
  int tp = 2;                      // the group size the collectives use
  bool quick = false;
  double max_allreduce_bytes = 64.0 * 1024 * 1024;  // without --for
  DType grid_dtype = DType::FP32;  // the size grid's GEMMs (the CPU backend computes in fp32)
  // GEMMs of several row blocks also probed whole (GemmTiming::blocks): ProfilingTraits::whole_blocked_gemms.
  bool whole_blocked_gemms = true;
};

Workload plan_workload(const WorkloadOptions& options);

// The op alone in a schedule whose buffers are only the ones it touches (same shapes, renumbered).
Schedule extract_op(const Schedule& s, const Op& op);
// A MatMul of contiguous row-major A[m,k] B[k,n] -> C[m,n] in fp32, as the builder lays out a forward GEMM.
Schedule synthetic_gemm(int64_t m, int64_t n, int64_t k, DType dtype = DType::FP32);
// Bytes the probe's buffers take in fp32.
int64_t mini_bytes(const Schedule& s);

}  // namespace domino::prof
