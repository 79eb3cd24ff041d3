// rank_placement.cpp: domino-exec's use of cpu_placement.hpp (see rank_placement.hpp).
#include "executor/job/rank_placement.hpp"

namespace domino {
namespace {

PlacementRequest request_of(const RunSettings& run) {
  PlacementRequest req;
  req.placement = run.placement.value_or(kDefaultPlacement);
  req.required = run.placement.has_value() && !run.check;
  req.share = run.check;  // --check compares numbers only: a shared core changes no result
  return req;
}

}  // namespace

void check_placement(const RunSettings& run, int ranks) {
  const std::vector<int> cpus = affinity_cpus();
  for (int r = 0; r < ranks; ++r) place_rank(request_of(run), cpus, r, ranks);
}

CpuPlacement effective_placement(const RunSettings& run) {
  return run.compute_cpu >= 0 ? request_of(run).placement : CpuPlacement::None;  // every placement sets it
}

void enter_rank_placement(RunSettings* run, int index, int ranks) {
  if (run->realtime) enter_realtime();
  if (ranks < 1) return;  // env mode without the launcher's count of ranks here: placing could stack them
  const RankCores cores = place_rank(request_of(*run), affinity_cpus(), index, ranks);
  pin_calling_thread(cores.process_cpu);
  run->compute_cpu = cores.compute_cpu;
}

HostSlot env_host_slot(const LaunchEnv& launch) {
  if (bound_by_launcher(affinity_cpus())) return {};  // alone on the cores the launcher gave it
  if (launch.local_world > 0 && launch.local_rank >= 0 && launch.local_rank < launch.local_world)
    return {launch.local_rank, launch.local_world};
  return {0, 0};
}

}  // namespace domino
