// op_costs_json.hpp: a schedule's ops as the simulator starts from them, as JSON: each op's stream, deps and
// the cost model's time for it, for analyses outside the event loop (scripts/rank-drift.py times the same
// ops on two ranks whose compute drifts apart) and for reading what the simulator was given.
#pragma once

#include <nlohmann/json.hpp>

#include "sim/engine/simulator.hpp"
#include "sim/ir/schedule.hpp"

namespace domino {

// {"plan", "tp", "sync_us", "ops": [{"op", "id", "stream", "kind", "phase", "deps", "duration_us",
// "arrival_wait_us"}]}. duration_us: a compute op's standalone time with the stream's stall, share and per
// op (what the event loop starts it with, before any slowdown beside a collective); a collective's transfer,
// the profile's constant arrival skew taken out. arrival_wait_us: the wait for the last rank that the
// simulator charges a collective at most (0 for one the ranks reach aligned, and for every other op). deps:
// indices of ops on the other stream that must finish first; each stream runs its ops in index order.
nlohmann::json op_costs_json(const Schedule& schedule, const OpCosts& costs);

}  // namespace domino
