// tuner_test_util.hpp: models and cost models the tuner tests share (shipped configs and profiles).
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "sim/cost/cost_model.hpp"
#include "sim/cost/profile.hpp"
#include "sim/model/model_spec.hpp"
#include "tuner/search_space.hpp"

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

constexpr auto kNone = OverlapMode::None, kIntra = OverlapMode::Intra, kInter = OverlapMode::Inter;
constexpr auto kBatch = SplitDim::Batch, kSeq = SplitDim::Sequence;
constexpr auto kDeep = SliceOrder::Deep, kDeepSpeed = SliceOrder::DeepSpeed;

// One tuning case: a shipped model cut to `layers` at `tp`, a shipped profile and the search space.
struct SearchCase {
  std::string name;
  std::string model;
  int layers;
  int tp;
  std::string profile;
  SearchOptions search;
};

inline void PrintTo(const SearchCase& c, std::ostream* os) { *os << c.name; }

// A search space over the given axes without the baselines' choices (the answer is the search's own, and
// the enumeration stays small).
inline SearchOptions search_options(std::vector<SplitDim> splits, std::vector<int> ps, std::vector<int> qs,
                                    std::vector<OverlapMode> overlaps, std::vector<bool> bwd,
                                    std::vector<SliceOrder> orders = {SliceOrder::Deep}) {
  SearchOptions o;
  o.splits = std::move(splits);
  o.p_values = std::move(ps);
  o.q_values = std::move(qs);
  o.overlaps = std::move(overlaps);
  o.bwd_overlaps = std::move(bwd);
  o.orders = std::move(orders);
  o.include_baselines = false;
  return o;
}

}  // namespace domino::test
