// brute_force_test.cpp: the proof obligation of the tuner. On small models (2-4 layers) with reduced
// choice sets, exhaustive enumeration of every per-block assignment (each simulated in full) must find
// the same optimum time as the tuner, on several models and profiles (up to 14 choices per block), both
// when the tuner runs its full search (every pair of choices) and when it screens them (forced here) and
// relies on its swap checks.
#include <gtest/gtest.h>

#include <string>

#include "tests/tuner/tuner_test_util.hpp"
#include "tuner/brute_force.hpp"
#include "tuner/tuner.hpp"

namespace domino {
namespace {

using Case = test::SearchCase;
using namespace test;  // search_options, the axis constants

std::vector<Case> cases() {
  return {
      // 12 choices per block (the 4 sliced ones in both orders), 2 layers: 20736 plans.
      {"cpu_gpt_2_layers", "cpu-gpt", 2, 2, "cpu-dev",
       search_options({kSeq}, {1, 2}, {1, 2}, {kNone, kInter}, {true}, {kDeep, kDeepSpeed})},
      // Slow network: communication dominates.
      {"cpu_gpt_2_layers_slow_link", "cpu-gpt", 2, 2, "cpu-dev-2gbps",
       search_options({kBatch}, {1, 4}, {1, 2}, {kNone, kInter}, {true})},
      // 4 choices, 3 layers: 4096 plans; Llama family (RMSNorm, SwiGLU, GQA, rotary).
      {"cpu_llama_3_layers", "cpu-llama", 3, 2, "cpu-dev",
       search_options({kBatch, kSeq}, {2}, {1}, {kIntra, kInter}, {true})},
      // Both slice orders on a Llama model (which domino-ds refuses; its order is still a plan): 256 plans.
      {"cpu_llama_2_layers_orders", "cpu-llama", 2, 2, "cpu-dev",
       search_options({kBatch, kSeq}, {2}, {1}, {kInter}, {true}, {kDeep, kDeepSpeed})},
      // GPU profile, GPT-3 13B shapes, 2 layers at TP 8 (6 choices: 1296 plans).
      {"gpt3_13b_2_layers_h100", "gpt3-13b", 2, 8, "dgx-h100",
       search_options({kSeq}, {1, 2, 4}, {1}, {kNone, kInter}, {true})},
      // 3 choices, 4 layers: 6561 plans, Llama-2 7B shapes on A100.
      {"llama2_7b_4_layers_a100", "llama2-7b", 4, 8, "dgx-a100",
       search_options({kSeq}, {1, 2, 4}, {1}, {kInter}, {true})},
      // Wider spaces for the full search (every pair simulated): 14 choices per block (both split
      // dimensions, every overlap mode, both orders), 2 layers: 38416 plans ...
      {"cpu_llama_2_layers_14_choices", "cpu-llama", 2, 2, "cpu-dev",
       search_options({kBatch, kSeq}, {1, 2}, {1}, {kNone, kIntra, kInter}, {true}, {kDeep, kDeepSpeed})},
      // ... and 12 choices with p up to 4 and column chunks on GPT-3 13B shapes at TP 8: 20736 plans.
      {"gpt3_13b_2_layers_12_choices_h100", "gpt3-13b", 2, 8, "dgx-h100",
       search_options({kSeq}, {1, 2, 4}, {1, 2}, {kNone, kInter}, {true})},
  };
}

class BruteForce : public ::testing::TestWithParam<Case> {};

void expect_same_optimum(const Case& c, const SearchTuning& tuning) {
  const ModelSpec m = test::shipped_model(c.model, c.layers, c.tp);
  const CostModel cost = test::shipped_cost(c.profile);
  TuneOptions options;
  options.sequence_parallel = SpSearch::Off;  // the exhaustive enumeration covers the space without SP
  options.search = c.search;
  options.tuning = tuning;
  options.progress = false;
  const TpTuning tuned = tune_tp(m, cost, options);
  const BruteForceResult truth = brute_force(m, cost, tuned.space);
  ASSERT_FALSE(tuned.top.empty());
  const EvaluatedPlan& best = tuned.top.front();
  // Same optimum time (to rounding: different plans may tie) ...
  EXPECT_NEAR(best.figures.iteration_us, truth.iteration_us, 1e-9 * truth.iteration_us)
      << "tuner " << best.figures.iteration_us << " us, brute force " << truth.iteration_us << " us over "
      << truth.evaluated << " plans";
  // ... the tuner's figure is the full simulation of the plan it returns ...
  EXPECT_DOUBLE_EQ(simulate_plan(m, best.plan, cost).iteration_us, best.figures.iteration_us);
  // ... and the brute-force plan, simulated, confirms the enumeration.
  EXPECT_DOUBLE_EQ(simulate_plan(m, plan_from_blocks(m, truth.layers, "bf"), cost).iteration_us, truth.iteration_us);
}

TEST_P(BruteForce, TunerFindsTheExhaustiveOptimum) {
  SearchTuning tuning;  // small spaces: every pair simulated
  expect_same_optimum(GetParam(), tuning);
}

TEST_P(BruteForce, ScreenedSearchWithSwapChecksFindsItToo) {
  SearchTuning tuning;
  tuning.full_search_probe_limit = 0;  // force screening ...
  tuning.keep_per_group = 1;    // ... down to one choice per group
  expect_same_optimum(GetParam(), tuning);
}

TEST_P(BruteForce, DecompositionPredictsTheFullSimulation) {
  // The search's additive figure for its best plan equals the full simulation on these models: the
  // chain decomposition is exact, not only good enough to rank.
  const Case& c = GetParam();
  const ModelSpec m = test::shipped_model(c.model, c.layers, c.tp);
  const CostModel cost = test::shipped_cost(c.profile);
  TuneOptions options;
  options.sequence_parallel = SpSearch::Off;  // the exhaustive enumeration covers the space without SP
  options.search = c.search;
  options.progress = false;
  const TpTuning tuned = tune_tp(m, cost, options);
  for (const EvaluatedPlan& e : tuned.top) {
    if (std::isnan(e.predicted_us)) continue;  // a baseline's plan
    EXPECT_NEAR(e.predicted_us, e.figures.iteration_us, 1e-6 * e.figures.iteration_us) << e.label;
  }
}

TEST(BruteForceCases, SomeSpacesAreWiderThanEightChoicesPerBlock) {
  // The full search's pair tables are only proven against enumeration on spaces this wide.
  int wide = 0;
  for (const Case& c : cases()) {
    const SearchSpace s = make_search_space(test::shipped_model(c.model, c.layers, c.tp), c.search);
    if (s.attn.size() > 8 && s.mlp.size() > 8) ++wide;
  }
  EXPECT_GE(wide, 2);
}

INSTANTIATE_TEST_SUITE_P(SmallModels, BruteForce, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

TEST(BruteForceScreening, SingleLayerFullAxesAgreeWithEnumeration) {
  // One layer over a wide space (about 50 choices per block, 2500 plans): the screened search, which the
  // tuner uses on large spaces, against enumeration.
  const ModelSpec m = test::shipped_model("cpu-gpt", 1, 2);
  const CostModel cost = test::shipped_cost("cpu-dev");
  TuneOptions options;
  options.sequence_parallel = SpSearch::Off;  // the exhaustive enumeration covers the space without SP
  options.search = search_options({kBatch, kSeq}, {1, 2, 4}, {1, 2}, {kNone, kIntra, kInter}, {false, true});
  options.progress = false;
  options.tuning.full_search_probe_limit = 0;
  const TpTuning tuned = tune_tp(m, cost, options);
  ASSERT_TRUE(tuned.stats.screened);
  const BruteForceResult truth = brute_force(m, cost, tuned.space);
  EXPECT_NEAR(tuned.top.front().figures.iteration_us, truth.iteration_us, 1e-9 * truth.iteration_us);
}

}  // namespace
}  // namespace domino
