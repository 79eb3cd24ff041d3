// profile_fit.hpp: turns the measuring ranks' raw samples into a Profile: the GEMM table plus a fitted
// peak and efficiency curve, memory bandwidth and fixed cost (least squares), the attention curve, the
// AllReduce latency and bus bandwidth (least squares on time = latency + bytes * 2(n-1)/n / busbw, exactly
// what CostModel::allreduce_us computes) plus its table, the same for the AllGather and ReduceScatter where
// measured (time = latency + bytes * (n-1)/n / busbw, bytes of the gathered buffer), the interference
// slowdowns, the spreads.
//
// A rank's collective samples (the executor's probes, rank_measure.hpp), per kind under its key ("collectives"
// for the AllReduce, "allgather", "reducescatter"): [{kind, bytes, samples_us}] for the ring (or the library's
// one algorithm), and "<key>_by_algorithm": {nvls: [...]} for every other forced algorithm; kind is
// to_string(OpKind) ("allreduce" when absent), and every rank lists the same entries in the same order.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/cost/profile.hpp"

namespace domino::prof {

struct FitInput {
  std::vector<nlohmann::json> ranks;  // run_ranks results (rank_measure.hpp schema)
  nlohmann::json compute;             // optional: compute entries measured elsewhere (CUDA), replaces ranks'
  int tp = 2;
  double link_gbps = 0;
  std::string name = "cpu-dev";
  std::string backend = "cpu";
  std::string workload_note;          // what was measured (grid or --for MODEL, quick)
  bool gemms_in_op_dtype = false;     // the backend computes a GEMM in its op's dtype (else always fp32)
  ProfileMetadata metadata;           // provenance of the measuring machine (the profiler fills it)
  std::string load_average_at_end;    // the machine's load when the measurement ended
};

struct FitResult {
  Profile profile;
  std::string summary;  // human-readable: fitted figures and how well they reproduce the points
};

FitResult fit_profile(const FitInput& in);

// Relative residuals |model - measured| / measured of a profile's fitted parameters alone (tables removed)
// against its own tables: GEMM curve vs GEMM table, latency + busbw vs the AllReduce table.
struct SelfCheck {
  std::vector<double> gemm, allreduce;
};
SelfCheck self_check(const Profile& p, int tp);

}  // namespace domino::prof
