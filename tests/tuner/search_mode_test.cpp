// search_mode_test.cpp: the full search (every pair of choices) against the screened one the tuner falls
// back to beyond the full search's budget. On mid-size models with tens of choices per block, the screened
// answer must stay within 0.5 % of the full one (both simulated in full), and each mode must say which ran.
#include <gtest/gtest.h>

#include <string>

#include "tests/tuner/tuner_test_util.hpp"
#include "tuner/tuner.hpp"

namespace domino {
namespace {

using MidSizeCase = test::SearchCase;
using namespace test;  // search_options, the axis constants

std::vector<MidSizeCase> cases() {
  return {
      // 58 choices per block: both split dimensions, p up to 4, q up to 2, every overlap mode.
      {"gpt3_13b_4_layers_h100", "gpt3-13b", 4, 8, "dgx-h100",
       search_options({kBatch, kSeq}, {1, 2, 4}, {1, 2}, {kNone, kIntra, kInter}, {false, true}, {kDeep})},
      // Both slice orders, sequence splits up to p 8: Llama shapes on A100.
      {"llama2_7b_6_layers_a100", "llama2-7b", 6, 8, "dgx-a100",
       search_options({kSeq}, {1, 2, 4, 8}, {1}, {kNone, kInter}, {false, true}, {kDeep, kDeepSpeed})},
      // CPU profile, communication-heavy slow link.
      {"cpu_gpt_5_layers_slow_link", "cpu-gpt", 5, 2, "cpu-dev-2gbps",
       search_options({kBatch, kSeq}, {1, 2, 4}, {1, 2}, {kNone, kInter}, {true}, {kDeep, kDeepSpeed})},
  };
}

TpTuning tune_case(const MidSizeCase& c, long full_search_probe_limit) {
  TuneOptions options;
  options.search = c.search;
  options.tuning.full_search_probe_limit = full_search_probe_limit;
  options.progress = false;
  return tune_tp(test::shipped_model(c.model, c.layers, c.tp), test::shipped_cost(c.profile), options);
}

class MidSize : public ::testing::TestWithParam<MidSizeCase> {};

TEST_P(MidSize, ScreenedAnswerIsWithinHalfAPercentOfTheFullSearch) {
  const MidSizeCase& c = GetParam();
  const TpTuning full = tune_case(c, 1L << 40);
  const TpTuning screened = tune_case(c, 0);
  ASSERT_FALSE(full.stats.screened);
  ASSERT_TRUE(screened.stats.screened);
  // A space where screening has something to drop: tens of choices per block.
  EXPECT_GE(full.space.attn.size(), 20u);
  EXPECT_LT(screened.stats.attn_kept, int(full.space.attn.size()));
  ASSERT_FALSE(full.top.empty());
  ASSERT_FALSE(screened.top.empty());
  const double full_us = full.top.front().figures.iteration_us;
  const double screened_us = screened.top.front().figures.iteration_us;
  EXPECT_LE(screened_us, 1.005 * full_us) << "screened " << screened_us << " us, full " << full_us << " us";
  // Both figures are full simulations of the plans returned, not the decomposition's predictions.
  const ModelSpec m = test::shipped_model(c.model, c.layers, c.tp);
  const CostModel cost = test::shipped_cost(c.profile);
  EXPECT_DOUBLE_EQ(simulate_plan(m, full.top.front().plan, cost).iteration_us, full_us);
  EXPECT_DOUBLE_EQ(simulate_plan(m, screened.top.front().plan, cost).iteration_us, screened_us);
}

TEST_P(MidSize, FullSearchSimulatesEveryTermOnceAndScreeningFewer) {
  const MidSizeCase& c = GetParam();
  const TpTuning full = tune_case(c, 1L << 40);
  // The budget check counts exactly what the full search simulates: each term once, from the cache after.
  EXPECT_EQ(full.stats.probe_simulations, full.stats.full_search_probes);
  EXPECT_EQ(full.stats.attn_kept, int(full.space.attn.size()));
  EXPECT_EQ(full.stats.mlp_kept, int(full.space.mlp.size()));
  const TpTuning screened = tune_case(c, full.stats.full_search_probes - 1);  // one probe over the budget
  EXPECT_TRUE(screened.stats.screened);
  EXPECT_EQ(screened.stats.full_search_probes, full.stats.full_search_probes);
  EXPECT_LT(screened.stats.probe_simulations, full.stats.probe_simulations);
  const TpTuning at_budget = tune_case(c, full.stats.full_search_probes);
  EXPECT_FALSE(at_budget.stats.screened);
  // The report names the search that ran, and for the screened one what the full one would need.
  EXPECT_NE(describe_search_mode(full.stats).find("full search"), std::string::npos);
  const std::string screened_note = describe_search_mode(screened.stats);
  EXPECT_NE(screened_note.find("screened search"), std::string::npos);
  EXPECT_NE(screened_note.find(std::to_string(full.stats.full_search_probes) + " probes"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Models, MidSize, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace domino
