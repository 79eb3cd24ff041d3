// exec_recompute_test.cpp: domino-exec --check on 2 CPU ranks runs a plan with activation recomputation
// (selective, full) as written in the plan file and matches megatron-sync without it and the tp 1 run: the
// recomputed ops, AllReduces included, are real ops of the schedule both ranks execute.
#include <gtest/gtest.h>

#include "exec_test_util.hpp"

namespace domino {
namespace {

using namespace exectest;

struct RecomputeCase {
  const char* model;
  Recompute mode;
};

class ExecRecompute : public ::testing::TestWithParam<RecomputeCase> {};

TEST_P(ExecRecompute, SlicedPlanMatchesTheReferences) {
  const RecomputeCase& c = GetParam();
  TempDir dir;
  ModelOverrides o;
  o.tp = 2;
  const ModelSpec m = load_model(model_file(c.model), o);
  Plan plan = make_uniform_plan(m, {SplitDim::Sequence, 2, 2, OverlapMode::Inter, true},
                                {SplitDim::Batch, 2, 1, OverlapMode::Inter, true}, "custom");
  plan.recompute = c.mode;
  save_plan(plan, dir / "plan.yaml");
  ASSERT_NE(read_text(dir / "plan.yaml").find(std::string("recompute: ") + to_string(c.mode)), std::string::npos);
  const Outcome out = run({dir / "plan.yaml", "--model", model_file(c.model), "--check"}, dir / "log", 240);
  EXPECT_EQ(out.exit_code, 0) << out.output;
  EXPECT_NE(out.output.find("check passed"), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("L1.attn.qkv.w.grad"), std::string::npos) << out.output;
}

INSTANTIATE_TEST_SUITE_P(Modes, ExecRecompute,
                         ::testing::Values(RecomputeCase{"tiny-gpt", Recompute::Selective},
                                           RecomputeCase{"tiny-llama", Recompute::Full}),
                         [](const auto& info) {
                           return std::string(info.param.model == std::string("tiny-gpt") ? "Gpt" : "Llama") +
                                  to_string(info.param.mode);
                         });

}  // namespace
}  // namespace domino
