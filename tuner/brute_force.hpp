// brute_force.hpp: the reference the tuner is proven against: every per-block assignment of a (small)
// model simulated in full. Exponential; only for tests and for spot checks on tiny spaces.
#pragma once

#include <vector>

#include "tuner/segment_costs.hpp"

namespace domino {

struct BruteForceResult {
  std::vector<LayerPlan> layers;  // the fastest plan (first in enumeration order among equals)
  double iteration_us = 0;
  long evaluated = 0;
};

// BadInput when the space holds more than max_plans plans.
BruteForceResult brute_force(const ModelSpec& model, const CostModel& cost, const SearchSpace& space,
                             long max_plans = 100000);

}  // namespace domino
