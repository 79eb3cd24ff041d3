// rank_measure.hpp: what one measuring rank process does, every probe through the Backend interface
// (probe_runner.hpp) of the backend named in the options: times every compute probe (all ranks at once, as
// the executor's ranks compute side by side), the backend's AllReduce, AllGather and ReduceScatter over the
// message sizes (Gloo on the CPU, NCCL on CUDA, each algorithm the backend can be forced to), the
// interference experiment (a GEMM chain on the compute stream beside AllReduces on the comm stream) and the
// arrival skew. Returns raw samples as JSON; the parent merges the ranks and fits (profile_fit.hpp).
//
// The collectives' samples, per kind (key from collective_samples_key): "<key>": the ring (or the library's
// one algorithm) and "<key>_by_algorithm": {"<algorithm>": ...} for the others, each a list of
// {"kind": "allreduce" | "allgather" | "reducescatter" (to_string(OpKind)), "bytes": the message size (an
// AllReduce's buffer; an AllGather's or ReduceScatter's full, gathered buffer, as nccl-tests' "size"),
// "samples_us": one duration per repeat, in the same order on every rank}. With a drift reference,
// "gemm_drift": {"reference": its label, "times_us": every timing of it, in order}.
#pragma once

#include <string>

#include "sim/ir/schedule.hpp"

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
  bool realtime = false;        // a SCHED_FIFO rank, its compute workers under the normal policy (--realtime)
  bool collectives_after_compute = false;  // GEMMs before each collective probe (CPU backend)
  // GEMM probes corrected against a reference timed beside each (drift_reference.hpp)
  bool drift_reference = false;
};

// The JSON key of a collective kind's samples: "collectives" (AllReduce), "allgather", "reducescatter".
std::string collective_samples_key(OpKind kind);

// comm: the rank's group (world >= 1). Progress lines are shown by rank 0 only.
nlohmann::json measure_rank(const Workload& w, GlooComm& comm, const MeasureOptions& options);

}  // namespace domino::prof
