// sp_tuner_test.cpp: the tuner searches plans under sequence parallelism beside the others: its SP answer is
// never slower than the SP baselines, --sp on/off keep to one kind, and a profile or model that cannot run
// sequence parallelism is named, never silently costed.
#include <gtest/gtest.h>

#include <algorithm>

#include "sim/base/error.hpp"
#include "tuner/brute_force.hpp"
#include "tuner/tuner.hpp"
#include "tuner_test_util.hpp"

namespace domino {
namespace {

TuneOptions quiet_options(SpSearch sp) {
  TuneOptions o;
  o.progress = false;
  o.top_k = 3;
  o.sequence_parallel = sp;
  return o;
}

TEST(SpTuner, TheSequenceParallelAnswerIsNeverSlowerThanItsBaselines) {
  const ModelSpec m = test::shipped_model("gpt3-13b", 4, 8);
  const CostModel cost = test::shipped_cost("dgx-h100");
  const TpTuning t = tune_tp(m, cost, quiet_options(SpSearch::Auto));
  ASSERT_TRUE(t.searched);
  ASSERT_TRUE(t.sp_searched) << t.sp_note;
  const EvaluatedPlan& with_sp = t.best_by_sp[1];
  const EvaluatedPlan& without_sp = t.best_by_sp[0];
  ASSERT_FALSE(with_sp.label.empty());
  ASSERT_FALSE(without_sp.label.empty());
  EXPECT_TRUE(with_sp.plan.sequence_parallel);
  EXPECT_FALSE(without_sp.plan.sequence_parallel);
  for (const char* name : {"megatron-sp", "megatron-sp-overlap"}) {
    const EvaluatedPlan* b = t.baseline(name);
    ASSERT_NE(b, nullptr) << name;
    EXPECT_TRUE(b->plan.sequence_parallel);
    EXPECT_LE(with_sp.figures.iteration_us, b->figures.iteration_us * (1 + 1e-9)) << name;
  }
  // SP shards the activations between the tensor-parallel GEMMs: the same layers need less memory.
  const EvaluatedPlan* sp = t.baseline("megatron-sp");
  const EvaluatedPlan* async = t.baseline("megatron-async");
  ASSERT_TRUE(sp && async);
  EXPECT_LT(sp->figures.peak_memory_bytes, async->figures.peak_memory_bytes);
  // The overall answer is the faster of the two.
  EXPECT_DOUBLE_EQ(t.top.front().figures.iteration_us,
                   std::min(with_sp.figures.iteration_us, without_sp.figures.iteration_us));
}

// Under sequence parallelism every pair is probed, so the search is exact for its decomposition: on a space
// small enough to enumerate, its answer is the exhaustive optimum of the SP plans (pipelined GEMMs included).
TEST(SpTuner, FindsTheExhaustiveOptimumOfTheSequenceParallelSpace) {
  const ModelSpec m = test::shipped_model("llama2-7b", 2, 4);
  const CostModel cost = test::shipped_cost("dgx-a100");
  TuneOptions o = quiet_options(SpSearch::On);
  o.search = test::search_options({test::kBatch, test::kSeq}, {1, 2}, {1, 2}, {test::kNone, test::kInter}, {true});
  const TpTuning t = tune_tp(m, cost, o);
  ASSERT_FALSE(t.top.empty());
  const BruteForceResult truth = brute_force(m, cost, t.sp_space);
  EXPECT_NEAR(t.top.front().figures.iteration_us, truth.iteration_us, 1e-9 * truth.iteration_us)
      << truth.evaluated << " plans enumerated";
  EXPECT_TRUE(std::any_of(t.sp_space.mlp.begin(), t.sp_space.mlp.end(), [](const BlockPlan& b) { return b.pipeline > 1; }));
}

TEST(SpTuner, OnAndOffKeepToOneKindOfPlan) {
  const ModelSpec m = test::shipped_model("llama2-7b", 3, 8);
  const CostModel cost = test::shipped_cost("dgx-h100");
  const TpTuning on = tune_tp(m, cost, quiet_options(SpSearch::On));
  ASSERT_FALSE(on.top.empty());
  for (const EvaluatedPlan& e : on.top) EXPECT_TRUE(e.plan.sequence_parallel) << e.label;
  EXPECT_FALSE(on.searched);
  const TpTuning off = tune_tp(m, cost, quiet_options(SpSearch::Off));
  for (const EvaluatedPlan& e : off.top) EXPECT_FALSE(e.plan.sequence_parallel) << e.label;
  EXPECT_FALSE(off.sp_searched);
  EXPECT_EQ(off.baseline("megatron-sp"), nullptr) << "off lists no plan it would never pick";
}

TEST(SpTuner, AProfileWithoutTheCurvesIsNamedAndOnlyOnRefusesIt) {
  Profile p = load_profile(test::repo_path("profiles/dgx-h100.yaml"));
  p.intra_node.allgather.reset();
  const CostModel cost(p);
  const ModelSpec m = test::shipped_model("gpt3-13b", 2, 8);
  const TpTuning t = tune_tp(m, cost, quiet_options(SpSearch::Auto));
  EXPECT_FALSE(t.sp_searched);
  EXPECT_NE(t.sp_note.find("AllGather"), std::string::npos) << t.sp_note;
  EXPECT_EQ(t.baseline("megatron-sp"), nullptr);
  try {
    tune_tp(m, cost, quiet_options(SpSearch::On));
    FAIL() << "--sp on with a profile that cannot cost an AllGather";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find("--sp on"), std::string::npos) << e.what();
  }
}

TEST(SpTuner, AModelSequenceParallelismIsNotBuiltForIsNamed) {
  ModelSpec m = test::shipped_model("gpt3-13b", 2, 1);  // tp 1: nothing to shard over
  const CostModel cost = test::shipped_cost("dgx-h100");
  const TpTuning t = tune_tp(m, cost, quiet_options(SpSearch::Auto));
  EXPECT_FALSE(t.sp_searched);
  EXPECT_NE(t.sp_note.find("tp >= 2"), std::string::npos) << t.sp_note;
  EXPECT_THROW(parse_sp_search("maybe"), Error);
}

}  // namespace
}  // namespace domino
