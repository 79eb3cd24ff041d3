// exec_mlp_head_test.cpp: domino-exec --check on 2 CPU ranks for models with ReLU or GeGLU MLPs and tied
// embeddings: a sliced plan's loss and gradients (the shared embedding's assembled from both ranks'
// vocabulary shards) equal megatron-sync's and the single-rank run's.
#include <gtest/gtest.h>

#include <fstream>

#include "exec_test_util.hpp"

namespace domino {
namespace {

using namespace exectest;

struct TiedCase {
  const char* model;
  const char* from;  // the activation line of the shipped test model
  const char* to;
};

void PrintTo(const TiedCase& c, std::ostream* os) { *os << c.model << " " << c.to; }

class ExecTiedHead : public ::testing::TestWithParam<TiedCase> {};

TEST_P(ExecTiedHead, SlicedPlanOnTwoRanksMatchesMegatronSyncAndSingleRank) {
  const TiedCase& c = GetParam();
  TempDir dir;
  std::string yaml = read_text(model_file(c.model));
  const size_t at = yaml.find(c.from);
  ASSERT_NE(at, std::string::npos);
  yaml.replace(at, std::string(c.from).size(), c.to);
  yaml += "tied_embeddings: true\n";
  std::ofstream(dir / "model.yaml") << yaml;
  ModelOverrides o;
  o.tp = 2;
  const ModelSpec m = load_model(dir / "model.yaml", o);
  ASSERT_TRUE(m.tied_embeddings);
  const BlockPlan seq{SplitDim::Sequence, 2, 2, OverlapMode::Inter, true};
  const BlockPlan batch{SplitDim::Batch, 2, 1, OverlapMode::Inter, true};
  save_plan(make_uniform_plan(m, seq, batch, "custom"), dir / "plan.yaml");
  const Outcome out = run({dir / "plan.yaml", "--model", dir / "model.yaml", "--check"}, dir / "log", 240);
  EXPECT_EQ(out.exit_code, 0) << out.output;
  EXPECT_NE(out.output.find("check passed"), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("emb.tok.grad"), std::string::npos) << out.output;
  EXPECT_EQ(out.output.find("head.w.grad"), std::string::npos) << "a tied head has no weight of its own";
}

INSTANTIATE_TEST_SUITE_P(Models, ExecTiedHead,
                         ::testing::Values(TiedCase{"tiny-gpt", "activation: gelu", "activation: relu"},
                                           TiedCase{"tiny-llama", "activation: swiglu", "activation: geglu"}),
                         [](const auto& info) {
                           return std::string(info.param.model) == "tiny-gpt" ? "GptRelu" : "LlamaGeglu";
                         });

}  // namespace
}  // namespace domino
