// brute_force.cpp: odometer enumeration of all per-block choices, each plan simulated in full.
#include "tuner/brute_force.hpp"

#include <fmt/format.h>

#include "sim/base/error.hpp"

namespace domino {

BruteForceResult brute_force(const ModelSpec& model, const CostModel& cost, const SearchSpace& space, long max_plans) {
  const double count = space.plans(model.layers);
  if (count > double(max_plans))
    throw_bad_input(fmt::format("brute force: {:.3g} plans exceed the limit of {}", count, max_plans));
  const int n = 2 * model.layers;
  std::vector<int> pick(n, 0);
  auto size_at = [&](int i) { return int(i % 2 == 0 ? space.attn.size() : space.mlp.size()); };
  BruteForceResult best;
  bool have = false;
  std::vector<LayerPlan> layers(model.layers);
  while (true) {
    for (int l = 0; l < model.layers; ++l) layers[l] = LayerPlan{space.attn[pick[2 * l]], space.mlp[pick[2 * l + 1]]};
    const SimFigures f = simulate_plan(model, plan_from_blocks(model, layers, "brute-force", space.sequence_parallel), cost);
    ++best.evaluated;
    if (!have || f.iteration_us < best.iteration_us) {
      best.iteration_us = f.iteration_us;
      best.layers = layers;
      have = true;
    }
    int i = n - 1;  // the last block varies fastest
    while (i >= 0 && ++pick[i] == size_at(i)) pick[i--] = 0;
    if (i < 0) break;
  }
  return best;
}

}  // namespace domino
