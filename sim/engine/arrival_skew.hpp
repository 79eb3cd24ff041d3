// arrival_skew.hpp: the ranks' arrival skew at each collective as a function of the schedule. The ranks of
// a TP group run the same compute, but not at the same speed: between two collectives they drift apart by
// an amount that grows with the compute run in between, and the rank that reaches the next collective first
// waits for the other. The profile's constant collectives.<level>.sync_us is the part that does not depend
// on the schedule (the cost model adds it to every collective); sync_per_compute is the drift per
// microsecond of compute, which this file turns into a per-collective addition.
#pragma once

#include <vector>

#include "sim/ir/schedule.hpp"

namespace domino {

// Per op: for a collective, the standalone compute (microseconds, from `duration`) the compute stream runs
// between the previous collective's launch point and this one's; 0 for every other op. A collective's
// launch point is the position on the compute stream after the last compute op it waits on (through other
// communication ops too); the first collective counts from the start of the iteration, where the ranks
// leave a barrier together. A collective launched no later than the previous one gets 0.
std::vector<double> compute_between_collectives(const Schedule& schedule, const std::vector<double>& duration);

// `duration` with sync_per_compute x compute_between_collectives added to every collective, written into
// `scratch`; `duration` itself (no copy) when sync_per_compute is 0, so that profiles without the field time
// every schedule exactly as before.
const std::vector<double>& with_arrival_skew(const Schedule& schedule, const std::vector<double>& duration,
                                             double sync_per_compute, std::vector<double>& scratch);

}  // namespace domino
