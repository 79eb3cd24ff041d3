// percentile.hpp: the one percentile every tool reports (iteration times, op durations, error figures).
#pragma once

#include <vector>

namespace domino {

// Linear-interpolation percentile (q in [0, 1], clamped) of v, as numpy's default; 0 for an empty v.
double percentile(std::vector<double> v, double q);
// The same of values already sorted ascending: several percentiles of one set sort it once.
double percentile_sorted(const std::vector<double>& sorted, double q);

}  // namespace domino
