// percentile.hpp: the one percentile every tool reports (iteration times, op durations, error figures).
#pragma once

#include <vector>

namespace domino {

// Linear-interpolation percentile (q in [0, 1], clamped) of v, as numpy's default; 0 for an empty v.
double percentile(std::vector<double> v, double q);

}  // namespace domino
