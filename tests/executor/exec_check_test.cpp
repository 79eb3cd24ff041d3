// exec_check_test.cpp: domino-exec --check passes on both model styles for plans with batch, sequence and
// column splits (and their 2-D combination), and the comparison it rests on detects differences.
#include <gtest/gtest.h>

#include <cmath>

#include "exec_test_util.hpp"
#include "executor/job/grad_check.hpp"

namespace domino {
namespace {

using namespace exectest;

struct CheckCase {
  const char* model;
  BlockPlan attn, mlp;
};

void PrintTo(const CheckCase& c, std::ostream* os) {
  auto block = [](const BlockPlan& b) {
    return std::string(to_string(b.dim)) + " p" + std::to_string(b.p) + " q" + std::to_string(b.q) +
           (b.order == SliceOrder::DeepSpeed ? " deepspeed" : "");
  };
  *os << c.model << " attn " << block(c.attn) << ", mlp " << block(c.mlp);
}

class ExecCheck : public ::testing::TestWithParam<CheckCase> {};

TEST_P(ExecCheck, PlanMatchesMegatronSyncAndSingleRank) {
  const CheckCase& c = GetParam();
  TempDir dir;
  ModelOverrides o;
  o.tp = 2;
  const ModelSpec m = load_model(model_file(c.model), o);
  save_plan(make_uniform_plan(m, c.attn, c.mlp, "custom"), dir / "plan.yaml");
  const Outcome out = run({dir / "plan.yaml", "--model", model_file(c.model), "--check"}, dir / "log", 240);
  EXPECT_EQ(out.exit_code, 0) << out.output;
  EXPECT_NE(out.output.find("check passed"), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("L1.mlp.fc2.w.grad"), std::string::npos) << "the table lists every gradient";
}

const BlockPlan kBatch2{SplitDim::Batch, 2, 1, OverlapMode::Inter, true};
const BlockPlan kSeq4{SplitDim::Sequence, 4, 1, OverlapMode::Intra, true};
const BlockPlan kCol2{SplitDim::Batch, 1, 2, OverlapMode::Intra, false};
const BlockPlan kSeq2Col2{SplitDim::Sequence, 2, 2, OverlapMode::Inter, true};
// DeepSpeed's order: domino-ds's blocks, and a sliced and chunked one on Llama (a plan, not domino-ds).
const BlockPlan kBatch2Ds{SplitDim::Batch, 2, 1, OverlapMode::Inter, true, SliceOrder::DeepSpeed};
const BlockPlan kSeq2Col2Ds{SplitDim::Sequence, 2, 2, OverlapMode::Inter, true, SliceOrder::DeepSpeed};

INSTANTIATE_TEST_SUITE_P(Plans, ExecCheck,
                         ::testing::Values(CheckCase{"tiny-gpt", kBatch2, kBatch2}, CheckCase{"tiny-gpt", kSeq4, kCol2},
                                           CheckCase{"tiny-gpt", kSeq2Col2, kSeq2Col2},
                                           CheckCase{"tiny-llama", kSeq2Col2, kBatch2},
                                           CheckCase{"tiny-llama", kCol2, kSeq4},
                                           CheckCase{"tiny-gpt", kBatch2Ds, kBatch2Ds},
                                           CheckCase{"tiny-llama", kSeq2Col2Ds, kBatch2Ds}),
                         [](const auto& info) {
                           return std::string(info.param.model == std::string("tiny-gpt") ? "Gpt" : "Llama") +
                                  std::to_string(info.index);
                         });

TEST(ExecCheckMetric, RelativeErrorSeesDifferencesAtTheTensorsScale) {
  const std::vector<float> ref{1.0f, -2.0f, 0.5f, 1e-6f};
  EXPECT_EQ(max_relative_error(ref, ref), 0.0);
  std::vector<float> a = ref;
  a[3] += 1e-7f;  // far below the scale (2.0): rounding noise
  EXPECT_LT(max_relative_error(a, ref), kCheckTolerance);
  a = ref;
  a[2] *= 1.001f;  // a real difference of 2.5e-4 of the scale
  EXPECT_GT(max_relative_error(a, ref), kCheckTolerance);
  a = ref;
  a[0] = std::nanf("");
  EXPECT_GT(max_relative_error(a, ref), kCheckTolerance);
  EXPECT_GT(max_relative_error({1.0f}, ref), kCheckTolerance);  // size mismatch
}

}  // namespace
}  // namespace domino
