// search_space_test.cpp: which choices the tuner considers, what it folds together, and its refusals.
#include <gtest/gtest.h>

#include <algorithm>

#include "sim/base/error.hpp"
#include "tests/tuner/tuner_test_util.hpp"
#include "tuner/segment_costs.hpp"

namespace domino {
namespace {

bool contains(const std::vector<BlockPlan>& list, const BlockPlan& b) {
  return std::find(list.begin(), list.end(), b) != list.end();
}

TEST(SearchSpace, FullSpaceOfTheDefaultModelFoldsEquivalentChoices) {
  const ModelSpec m = default_model();  // micro-batch 8, seq 128, hidden 384: every p and q divides
  const SearchSpace s = make_search_space(m, SearchOptions{});
  // p=1: q1 {none, inter} x bwd 2 = 4, q2/q4 3 overlaps x 2 = 12; p>1: 3 p x 2 dims x 3 q x 3 x 2 = 108.
  EXPECT_EQ(s.attn.size(), 124u);
  EXPECT_EQ(s.mlp.size(), 124u);
  for (const BlockPlan& b : s.attn) {
    EXPECT_EQ(b, canonical(b));
    if (b.p == 1) {
      EXPECT_EQ(b.dim, SplitDim::Batch);
    }
  }
  EXPECT_FALSE(contains(s.attn, BlockPlan{SplitDim::Batch, 1, 1, OverlapMode::Intra, false}));
  EXPECT_TRUE(contains(s.attn, BlockPlan{SplitDim::Sequence, 8, 4, OverlapMode::Inter, true}));
  // Simpler choices first: the very first is the unsliced, non-overlapped block.
  EXPECT_EQ(s.attn.front(), (BlockPlan{SplitDim::Batch, 1, 1, OverlapMode::None, false}));
  EXPECT_TRUE(std::is_sorted(s.attn.begin(), s.attn.end(), simpler));
}

TEST(SearchSpace, FoldedChoicesReallyAreEquivalent) {
  const ModelSpec m = default_model();
  const CostModel cost = test::shipped_cost("cpu-dev");
  const BlockPlan sync{};
  for (bool bwd : {false, true}) {
    const BlockPlan none{SplitDim::Batch, 1, 1, OverlapMode::None, bwd};
    const BlockPlan intra{SplitDim::Batch, 1, 1, OverlapMode::Intra, bwd};
    const BlockPlan seq_p1{SplitDim::Sequence, 1, 2, OverlapMode::Intra, bwd};
    const BlockPlan bat_p1{SplitDim::Batch, 1, 2, OverlapMode::Intra, bwd};
    EXPECT_DOUBLE_EQ(simulate_plan(m, make_uniform_plan(m, none, none, "x"), cost).iteration_us,
                     simulate_plan(m, make_uniform_plan(m, intra, intra, "x"), cost).iteration_us);
    EXPECT_DOUBLE_EQ(simulate_plan(m, make_uniform_plan(m, seq_p1, sync, "x"), cost).iteration_us,
                     simulate_plan(m, make_uniform_plan(m, bat_p1, sync, "x"), cost).iteration_us);
  }
}

TEST(SearchSpace, LimitsAndSplitsAreHonoured) {
  ModelSpec m = default_model();
  SearchOptions o;
  o.max_p = 2;
  o.max_q = 1;
  o.splits = {SplitDim::Sequence};
  o.include_baselines = false;
  const SearchSpace s = make_search_space(m, o);
  for (const BlockPlan& b : s.mlp) {
    EXPECT_LE(b.p, 2);
    EXPECT_EQ(b.q, 1);
    if (b.p > 1) {
      EXPECT_EQ(b.dim, SplitDim::Sequence);
    }
  }
  // p1: {none, inter} x 2; seq p2: 3 x 2.
  EXPECT_EQ(s.mlp.size(), 10u);
}

TEST(SearchSpace, BaselineChoicesAreAlwaysIncluded) {
  const ModelSpec m = default_model();
  SearchOptions o;
  o.splits = {SplitDim::Sequence};  // domino-ds splits the batch: added anyway
  o.max_q = 1;
  const SearchSpace s = make_search_space(m, o);
  for (const char* name : {"megatron-sync", "megatron-async", "domino-ds"}) {
    const Plan p = make_strategy_plan(name, m);
    EXPECT_TRUE(contains(s.attn, p.layers[0].attn)) << name;
    EXPECT_TRUE(contains(s.mlp, p.layers[0].mlp)) << name;
  }
  EXPECT_FALSE(s.pinned.empty());
}

TEST(SearchSpace, MicroBatchOneWithBatchSplitsOnlyIsAnEmptySpace) {
  ModelSpec m = default_model();
  m.micro_batch = 1;
  SearchOptions o;
  o.splits = {SplitDim::Batch};
  try {
    make_search_space(m, o);
    FAIL() << "expected BadInput";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find("empty search space"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sequence"), std::string::npos) << e.what();
  }
  o.splits = {SplitDim::Batch, SplitDim::Sequence};
  EXPECT_NO_THROW(make_search_space(m, o));
}

TEST(SearchSpace, ParsesSplitLists) {
  EXPECT_EQ(parse_splits("sequence,batch"), (std::vector<SplitDim>{SplitDim::Batch, SplitDim::Sequence}));
  EXPECT_EQ(parse_splits("seq"), (std::vector<SplitDim>{SplitDim::Sequence}));
  EXPECT_THROW(parse_splits("batch,rows"), Error);
  EXPECT_THROW(parse_splits(""), Error);
}

}  // namespace
}  // namespace domino
