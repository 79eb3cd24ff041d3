// rank_placement.hpp: a rank process's place on the host's cores, chosen from the run's --cpu-placement and
// this process's affinity mask (cpu_placement.hpp) right after the rank starts, before it creates any thread.
#pragma once

#include "executor/job/exec_options.hpp"
#include "executor/job/launch_env.hpp"

namespace domino {

// Checks, before any rank starts, that the mask holds the placement asked for `ranks` ranks on this host
// (BadInput otherwise, naming the mask); a --check run, which times nothing, may share cores.
void check_placement(const RunSettings& run, int ranks);

// In a rank process after enter_rank_placement: the placement asked for, or the default, where it took
// effect; none where the default was dropped (a mask without a CPU per rank). What traces and summaries
// record.
CpuPlacement effective_placement(const RunSettings& run);

// Run inside rank process number `index` of the host's `ranks`: with --realtime puts it under SCHED_FIFO
// (kRealtimeCommPriority: every later thread inherits it; the compute worker leaves it), pins the process
// (placement rank: every thread it starts afterwards, Gloo's device loop included, inherits the core) and
// sets run->compute_cpu for the stream workers. Throws BadInput as check_placement does, Runtime when the
// kernel refuses the pin.
void enter_rank_placement(RunSettings* run, int index, int ranks);

// Env mode: this rank's index among the host's ranks and their count, as the outside launcher said (a rank
// bound to cores of its own by the launcher counts as alone on them; ranks 0 when the launcher did not say
// how many share this host: nothing is placed then).
struct HostSlot {
  int index = 0;
  int ranks = 1;
};
HostSlot env_host_slot(const LaunchEnv& launch);

}  // namespace domino
