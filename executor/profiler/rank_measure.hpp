// rank_measure.hpp: what one measuring rank process does, every probe through the Backend interface
// (probe_runner.hpp) of the backend named in the options: times every compute probe (all ranks at once, as
// the executor's ranks compute side by side), the backend's AllReduce over the message sizes (Gloo on the
// CPU, NCCL on CUDA), the interference experiment (a GEMM chain on the compute stream beside AllReduces on
// the comm stream) and the arrival skew. Returns raw samples as JSON; the parent merges the ranks and fits
// (profile_fit.hpp).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "executor/profiler/profile_workload.hpp"

namespace domino {
class GlooComm;
}

namespace domino::prof {

struct MeasureOptions {
  bool quick = false;
  double link_gbps = 0;  // 0: loopback; sizes repeats of large messages by the expected time
  std::string backend = "cpu";  // a name make_backend knows (executor/job/backends.hpp)
};

// comm: the rank's group (world >= 1). Progress lines are shown by rank 0 only.
nlohmann::json measure_rank(const Workload& w, GlooComm& comm, const MeasureOptions& options);

}  // namespace domino::prof
