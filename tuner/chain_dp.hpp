// chain_dp.hpp: exact K-best dynamic programming over a chain of decisions whose cost is a sum of
// per-stage terms and terms between neighbouring stages (the layer/block sequence of a model).
#pragma once

#include <vector>

namespace domino {

// One stage of the chain: `size` options, a cost per option, and (from stage 1 on) a cost per pair
// (option of the previous stage, option of this one), row-major [prev * size + this]. Costs may be
// +infinity (forbidden). Tables are borrowed: stages of the same class share one table.
struct ChainStage {
  int size = 0;
  const double* unary = nullptr;       // size entries
  const double* pair_in = nullptr;     // prev.size * size entries; null for stage 0
};

struct ChainPath {
  double cost = 0;        // base + sum of the terms along the path
  std::vector<int> pick;  // option per stage
};

// The k cheapest distinct paths, cheapest first. Ties go to the lexicographically smaller path read
// from the last stage backwards (low option indices first), so results are deterministic.
// Paths of infinite cost are not returned.
std::vector<ChainPath> k_best_paths(const std::vector<ChainStage>& stages, double base, int k);

// Cost of one path (same terms), for checks.
double path_cost(const std::vector<ChainStage>& stages, double base, const std::vector<int>& pick);

}  // namespace domino
