// segment_costs_test.cpp: the pair terms the search takes as zero without a probe (blocks that cannot
// overlap) really are zero when simulated, on sequential models of every norm placement, and the rule is
// never applied to parallel residual blocks, where such pairs do interact.
#include "tuner/segment_costs.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>

#include "tests/tuner/tuner_test_util.hpp"

namespace domino {
namespace {

using namespace test;  // search_options, the axis constants

// Pair terms of a two-layer probe simulated in full, around the space's simplest choices (p = 1).
class RawPairTerms {
 public:
  RawPairTerms(const ModelSpec& probe, const CostModel& cost, const SearchSpace& space)
      : probe_(probe), cost_(cost), space_(space), ref_{space.attn.front(), space.mlp.front()} {}

  // Probe blocks k (attn 0 = 0, mlp 0 = 1, attn 1 = 2) and k + 1 at choices a and b.
  double term(int k, int a, int b) { return time(k, a, b) - time(k, a, -1) - time(k, -1, b) + base(k); }
  double base(int k) { return time(k, -1, -1); }
  const BlockPlan& left(int k, int a) const { return (k % 2 == 0 ? space_.attn : space_.mlp)[a]; }
  const BlockPlan& right(int k, int b) const { return (k % 2 == 0 ? space_.mlp : space_.attn)[b]; }

 private:
  double time(int k, int a, int b) {
    const auto key = std::make_tuple(k, a, b);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    std::vector<LayerPlan> layers(probe_.layers, ref_);
    auto set = [&](int pos, const BlockPlan& choice) {
      (pos % 2 == 0 ? layers[pos / 2].attn : layers[pos / 2].mlp) = choice;
    };
    if (a >= 0) set(k, left(k, a));
    if (b >= 0) set(k + 1, right(k, b));
    const double t = simulate_plan(probe_, plan_from_blocks(probe_, layers, "probe"), cost_).iteration_us;
    return cache_[key] = t;
  }

  const ModelSpec probe_;
  const CostModel& cost_;
  const SearchSpace& space_;
  const LayerPlan ref_;
  std::map<std::tuple<int, int, int>, double> cache_;
};

struct ModelCase {
  std::string name, model, profile;
  int tp;
  NormPlacement norms;
  std::vector<SliceOrder> orders;
};

void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.name; }

// Parallel blocks keep the model's own (pre) norms.
ModelSpec probe_model(const ModelCase& c, Residual residual) {
  ModelSpec m = test::shipped_model(c.model, 2, c.tp);
  if (residual == Residual::Sequential) m.norm_placement = c.norms;
  m.residual = residual;
  validate_model(m);
  return m;
}

SearchSpace probe_space(const ModelSpec& m, const ModelCase& c) {
  SearchSpace s = make_search_space(
      m, search_options({kBatch, kSeq}, {1, 2, 4}, {1, 2}, {kNone, kIntra, kInter}, {false, true}, c.orders));
  EXPECT_EQ(s.attn.front().p, 1);  // the reference the terms are taken around
  EXPECT_EQ(s.mlp.front().p, 1);
  return s;
}

class IndependentPairs : public ::testing::TestWithParam<ModelCase> {};

TEST_P(IndependentPairs, PairsThatCannotOverlapHaveAZeroTermWhenSimulated) {
  const ModelCase& c = GetParam();
  const ModelSpec m = probe_model(c, Residual::Sequential);
  const SearchSpace space = probe_space(m, c);
  const CostModel cost = test::shipped_cost(c.profile);
  RawPairTerms raw(m, cost, space);
  int checked = 0, overlapping = 0;
  for (int k = 0; k < 2; ++k) {  // attn -> mlp, mlp -> next attn
    for (int a = 0; a < int((k == 0 ? space.attn : space.mlp).size()); ++a) {
      for (int b = 0; b < int((k == 0 ? space.mlp : space.attn).size()); ++b) {
        if (!blocks_cannot_overlap(m, raw.left(k, a), raw.right(k, b))) {
          ++overlapping;
          continue;
        }
        EXPECT_NEAR(raw.term(k, a, b), 0.0, 1e-9 * raw.base(k))
            << "k " << k << ": " << block_label(raw.left(k, a)) << " -> " << block_label(raw.right(k, b));
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 50);
  EXPECT_GT(overlapping, 20);  // the rest still needs its probes
}

TEST_P(IndependentPairs, TheSearchTakesThemAsZeroWithoutAProbe) {
  const ModelCase& c = GetParam();
  const ModelSpec m = probe_model(c, Residual::Sequential);
  const SearchSpace space = probe_space(m, c);
  const CostModel cost = test::shipped_cost(c.profile);
  SegmentCosts costs(m, cost, space, 0, 0);
  const long before = costs.simulations();
  // The first (simplest) choice of a list with p > 1 along `dim` and the given overlap mode.
  auto find = [](const std::vector<BlockPlan>& list, SplitDim dim, OverlapMode overlap) {
    int i = 0;
    while (list[i].p == 1 || list[i].dim != dim || list[i].overlap != overlap) ++i;
    return i;
  };
  const int seq_mlp = find(space.mlp, kSeq, kNone), batch_mlp = find(space.mlp, kBatch, kNone);
  const int seq_attn = find(space.attn, kSeq, kNone), seq_attn_inter = find(space.attn, kSeq, kInter);
  // A single-slice attention before a sequence-split MLP; a batch-split MLP before a sequence-split
  // attention; lined-up slices without inter-block overlap (the deep order).
  EXPECT_EQ(costs.pair(0, 0, seq_mlp), 0.0);
  EXPECT_EQ(costs.pair(1, batch_mlp, seq_attn), 0.0);
  EXPECT_EQ(costs.pair(1, seq_mlp, seq_attn), 0.0);
  EXPECT_EQ(costs.simulations(), before);
  // Lined-up slices where the attention holds back its norm backward behind the MLP's first slice: probed.
  costs.pair(1, seq_mlp, seq_attn_inter);
  EXPECT_GT(costs.simulations(), before);
}

TEST_P(IndependentPairs, ParallelBlocksAlwaysNeedTheirProbes) {
  // The MLP of a parallel block reads the layer's input, so it overlaps the attention whatever the slices:
  // pairs that could not overlap in sequential blocks do here.
  const ModelCase& c = GetParam();
  const ModelSpec parallel = probe_model(c, Residual::Parallel);
  const ModelSpec sequential = probe_model(c, Residual::Sequential);
  const SearchSpace space = probe_space(parallel, c);
  const CostModel cost = test::shipped_cost(c.profile);
  RawPairTerms raw(parallel, cost, space);
  double largest = 0;
  for (int a = 1; a < int(space.attn.size()); ++a) {
    for (int b = 1; b < int(space.mlp.size()); ++b) {
      EXPECT_FALSE(blocks_cannot_overlap(parallel, space.attn[a], space.mlp[b]));
      if (blocks_cannot_overlap(sequential, space.attn[a], space.mlp[b]))
        largest = std::max(largest, std::abs(raw.term(0, a, b)));
    }
  }
  EXPECT_GT(largest, 1e-6 * raw.base(0));
}

INSTANTIATE_TEST_SUITE_P(
    Models, IndependentPairs,
    ::testing::Values(
        ModelCase{"cpu_gpt_pre_norm", "cpu-gpt", "cpu-dev", 2, NormPlacement::Pre, {kDeep, kDeepSpeed}},
        ModelCase{"cpu_llama_post_norm", "cpu-llama", "cpu-dev", 2, NormPlacement::Post, {kDeep}},
        ModelCase{"cpu_llama_sandwich_norm",
                  "cpu-llama",
                  "cpu-dev-2gbps",
                  2,
                  NormPlacement::Sandwich,
                  {kDeep, kDeepSpeed}},
        ModelCase{"gpt3_13b_h100", "gpt3-13b", "dgx-h100", 8, NormPlacement::Pre, {kDeep}}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace domino
