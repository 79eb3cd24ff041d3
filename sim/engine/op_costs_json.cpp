// op_costs_json.cpp: a schedule's ops with the cost model's times, as JSON (see op_costs_json.hpp).
#include "sim/engine/op_costs_json.hpp"

#include <algorithm>

#include "sim/engine/arrival_skew.hpp"

namespace domino {

nlohmann::json op_costs_json(const Schedule& schedule, const OpCosts& costs) {
  const std::vector<double> wait =
      arrival_waits(schedule, costs.duration, ArrivalSkew{costs.sync_us, costs.sync_per_compute});
  nlohmann::json ops = nlohmann::json::array();
  for (const Op& op : schedule.ops) {
    const size_t i = size_t(op.index);
    // The cost model put the constant skew in every collective that takes time (arrival_skew.hpp).
    const double duration = collective(op.kind) && costs.duration[i] > 0
                                ? std::max(0.0, costs.duration[i] - costs.sync_us)
                                : costs.duration[i];
    ops.push_back({{"op", op.index},
                   {"id", op_id(op)},
                   {"stream", to_string(op.stream)},
                   {"kind", to_string(op.kind)},
                   {"phase", to_string(op.phase)},
                   {"deps", op.deps},
                   {"duration_us", duration},
                   {"arrival_wait_us", wait[i]}});
  }
  return {{"plan", schedule.plan.strategy},
          {"tp", collective_ranks(schedule, SimOptions{})},
          {"sync_us", costs.sync_us},
          {"ops", std::move(ops)}};
}

}  // namespace domino
