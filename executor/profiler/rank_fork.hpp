// rank_fork.hpp: runs a measuring body in `ranks` forked processes joined by a Gloo group (FileStore in a
// fresh temporary folder), optionally inside an emulated link's network namespaces, and collects each
// rank's JSON result. Forking (not re-executing) keeps the parent's workload: the children share it. A thin
// adapter on the one rank launcher (executor/runtime/rank_launcher.hpp), which also sets the stop policy.
#pragma once

#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "executor/runtime/cpu_placement.hpp"

namespace domino {
class GlooComm;
}

namespace domino::prof {

struct ForkOptions {
  int ranks = 2;
  double link_gbps = 0;  // > 0: ranks in LinkEmulation namespaces, egress shaped to this rate
  int timeout_s = 900;   // the whole measurement; a stuck rank is killed after this
  // Where each rank process runs (cpu_placement.hpp): Rank pins rank r's whole process (Gloo's loop
  // included) to the r-th CPU of the affinity mask, as domino-exec does; `placement_given` refuses a mask
  // without a CPU per rank instead of dropping the placement.
  CpuPlacement placement = kDefaultProfilePlacement;
  bool placement_given = false;
  // With rank placement: each rank also runs an IdlePoller (idle_poller.hpp) on its CPU, so that a message
  // arriving at an idle rank does not wait for a halted CPU to wake up.
  bool idle_poll = true;
  // Each rank process SCHED_FIFO at kRealtimeCommPriority before it starts a thread (Gloo's loop inherits
  // it; the probes' compute workers leave it: MeasureOptions::realtime), as domino-exec --realtime runs.
  bool realtime = false;
};

// The placement the ranks get: options.placement, or none where a default one is dropped (a mask without a
// CPU per rank). BadInput when they cannot be placed as asked: compute placement (only whole ranks are
// placed), or a placement given for a mask without a CPU per rank.
CpuPlacement check_placement(const ForkOptions& options);

// Results of every rank, by rank (check_placement first). Throws domino::Error (runtime) naming the rank
// that failed and why.
std::vector<nlohmann::json> run_ranks(const ForkOptions& options,
                                      const std::function<nlohmann::json(GlooComm&)>& body);

}  // namespace domino::prof
