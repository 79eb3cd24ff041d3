// tuner_test_util.hpp: models and cost models the tuner tests share (shipped configs and profiles).
#pragma once

#include <string>

#include "sim/cost/cost_model.hpp"
#include "sim/model/model_spec.hpp"
#include "sim/cost/profile.hpp"

namespace domino::test {

inline std::string repo_path(const std::string& rel) { return std::string(DOMINO_TEST_DATA) + "/../" + rel; }

inline CostModel shipped_cost(const std::string& name) {
  return CostModel(load_profile(repo_path("profiles/" + name + ".yaml")));
}

// A shipped model with its layer count (and optionally tp) changed.
inline ModelSpec shipped_model(const std::string& name, int layers, int tp = 0) {
  ModelSpec m = load_model(repo_path("configs/models/" + name + ".yaml"));
  m.layers = layers;
  if (tp > 0) m.tp = tp;
  validate_model(m);
  return m;
}

}  // namespace domino::test
