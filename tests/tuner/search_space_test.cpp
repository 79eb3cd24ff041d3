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
  // p=1: q1 {none, inter} x bwd 2 = 4, q2/q4 3 overlaps x 2 = 12, one order; p>1: 3 p x 2 dims x 3 q x 3 x 2
  // x 2 orders = 216.
  EXPECT_EQ(s.attn.size(), 232u);
  EXPECT_EQ(s.mlp.size(), 232u);
  for (const BlockPlan& b : s.attn) {
    EXPECT_EQ(b, canonical(b));
    if (b.p == 1) {
      EXPECT_EQ(b.dim, SplitDim::Batch);
      EXPECT_EQ(b.order, SliceOrder::Deep);
    }
  }
  EXPECT_TRUE(contains(s.attn, BlockPlan{SplitDim::Sequence, 4, 2, OverlapMode::Intra, false, SliceOrder::DeepSpeed}));
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
    // One slice: the deepspeed order emits the deep order's ops in the deep order's sequence, next to
    // sliced neighbours in either order too.
    for (const SliceOrder neighbour : {SliceOrder::Deep, SliceOrder::DeepSpeed}) {
      const BlockPlan sliced{SplitDim::Batch, 2, 1, OverlapMode::Inter, true, neighbour};
      BlockPlan ds_p1 = bat_p1;
      ds_p1.order = SliceOrder::DeepSpeed;
      EXPECT_DOUBLE_EQ(simulate_plan(m, make_uniform_plan(m, ds_p1, sliced, "x"), cost).iteration_us,
                       simulate_plan(m, make_uniform_plan(m, bat_p1, sliced, "x"), cost).iteration_us);
    }
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
  // p1: {none, inter} x 2; seq p2: 3 x 2 x 2 orders.
  EXPECT_EQ(s.mlp.size(), 16u);
  o.orders = {SliceOrder::DeepSpeed};
  const SearchSpace ds = make_search_space(m, o);
  // p1 folds to the deep order; seq p2: 3 x 2 in the deepspeed order only.
  EXPECT_EQ(ds.mlp.size(), 10u);
  for (const BlockPlan& b : ds.mlp) EXPECT_EQ(b.order, b.p == 1 ? SliceOrder::Deep : SliceOrder::DeepSpeed);
}

TEST(SearchSpace, BaselineChoicesAreAlwaysIncluded) {
  const ModelSpec m = default_model();
  SearchOptions o;
  o.splits = {SplitDim::Sequence};  // domino-ds and domino-deep split the batch: added anyway
  o.orders = {SliceOrder::Deep};    // domino-ds runs in the deepspeed order: added anyway
  o.max_q = 1;
  const SearchSpace s = make_search_space(m, o);
  for (const char* name : {"megatron-sync", "megatron-async", "domino-ds", "domino-deep"}) {
    const Plan p = make_strategy_plan(name, m);
    EXPECT_TRUE(contains(s.attn, p.layers[0].attn)) << name;
    EXPECT_TRUE(contains(s.mlp, p.layers[0].mlp)) << name;
  }
  EXPECT_FALSE(s.pinned.empty());
  // On a model DeepSpeed's Domino does not run, domino-ds adds nothing; domino-deep still does.
  ModelSpec llama = default_model();
  llama.family = Family::Llama, llama.positions = Positions::Rotary, llama.norm = NormKind::RmsNorm, llama.activation = Activation::Swiglu;
  const SearchSpace ls = make_search_space(llama, o);
  const BlockPlan ds_choice = make_strategy_plan("domino-ds", m).layers[0].attn;
  EXPECT_FALSE(contains(ls.attn, ds_choice));
  EXPECT_TRUE(contains(ls.attn, make_strategy_plan("domino-deep", llama).layers[0].attn));
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

TEST(SearchSpace, ParsesOrderLists) {
  EXPECT_EQ(parse_orders("deepspeed,deep"), (std::vector<SliceOrder>{SliceOrder::Deep, SliceOrder::DeepSpeed}));
  EXPECT_EQ(parse_orders("deepspeed"), (std::vector<SliceOrder>{SliceOrder::DeepSpeed}));
  EXPECT_THROW(parse_orders("deep,wide"), Error);
  EXPECT_THROW(parse_orders(""), Error);
}

TEST(SearchSpace, ParsesSplitLists) {
  EXPECT_EQ(parse_splits("sequence,batch"), (std::vector<SplitDim>{SplitDim::Batch, SplitDim::Sequence}));
  EXPECT_EQ(parse_splits("seq"), (std::vector<SplitDim>{SplitDim::Sequence}));
  EXPECT_THROW(parse_splits("batch,rows"), Error);
  EXPECT_THROW(parse_splits(""), Error);
}

}  // namespace
}  // namespace domino

namespace domino {
namespace {

// Post / sandwich norms need whole rows after the AllReduce, parallel blocks have no DeepSpeed order: the
// space leaves those choices out and its description says why.
TEST(SearchSpace, BlockStructureSkipsChoicesAndSaysWhy) {
  ModelSpec post = default_model();
  post.norm_placement = NormPlacement::Sandwich, post.set_biases(false);
  const SearchSpace s = make_search_space(post, SearchOptions{});
  EXPECT_TRUE(std::all_of(s.attn.begin(), s.attn.end(), [](const BlockPlan& b) { return b.q == 1; }));
  EXPECT_TRUE(std::all_of(s.mlp.begin(), s.mlp.end(), [](const BlockPlan& b) { return b.q == 1; }));
  EXPECT_NE(describe(s, SearchOptions{}).find("column splits q>1 skipped: sandwich-norm"), std::string::npos)
      << describe(s, SearchOptions{});
  SearchOptions q1;
  q1.q_values = {1};
  EXPECT_EQ(describe(make_search_space(post, q1), q1).find("skipped"), std::string::npos);

  ModelSpec par = default_model();
  par.residual = Residual::Parallel;
  const SearchSpace p = make_search_space(par, SearchOptions{});
  EXPECT_TRUE(std::none_of(p.attn.begin(), p.attn.end(),
                           [](const BlockPlan& b) { return b.order == SliceOrder::DeepSpeed; }));
  EXPECT_TRUE(std::any_of(p.attn.begin(), p.attn.end(), [](const BlockPlan& b) { return b.q > 1; }));
  EXPECT_NE(describe(p, SearchOptions{}).find("order deepspeed skipped"), std::string::npos);
  EXPECT_EQ(describe(make_search_space(default_model(), SearchOptions{}), SearchOptions{}).find("skipped"),
            std::string::npos);
}

}  // namespace
}  // namespace domino
