// rank_measure.hpp: what one measuring rank process does: times every compute probe (all ranks at once,
// as the executor's ranks compute side by side), Gloo AllReduce over the message sizes, and the
// interference experiment (a GEMM thread and a communication thread, as the executor's two streams).
// Returns raw samples as JSON; the parent merges the ranks and fits (profile_fit.hpp).
#pragma once

#include <nlohmann/json.hpp>

#include "executor/profiler/profile_workload.hpp"

namespace domino {
class GlooComm;
}

namespace domino::prof {

struct MeasureOptions {
  bool quick = false;
  double link_gbps = 0;  // 0: loopback; sizes repeats of large messages by the expected time
  bool compute = true;   // false: collectives and interference only (the CUDA path times compute itself)
};

// comm: the rank's group (world >= 1). Progress lines are shown by rank 0 only.
nlohmann::json measure_rank(const Workload& w, GlooComm& comm, const MeasureOptions& options);

}  // namespace domino::prof
