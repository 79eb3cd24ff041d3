// collective_usage.hpp: which algorithm the cost model picks for each collective of a schedule, told per
// collective kind for domino-sim's report.
#pragma once

#include <string>

#include "sim/cost/cost_model.hpp"
#include "sim/ir/schedule.hpp"

namespace domino {

// One line per collective kind the schedule has, AllReduce first: "allreduce algorithms   nvls x 96 (16 SMs),
// ring x 4 (24 SMs)" (algorithms by name, the SMs each holds where stated). "" where nothing is communicated
// or the profile has one ring curve per level and kind (nothing to tell). `ranks` > 0: every collective over
// that many ranks (as SimOptions::allreduce_ranks), else the plan's TP degree.
std::string collective_algorithm_lines(const Schedule& schedule, const CostModel& cost, int ranks = 0);

}  // namespace domino
