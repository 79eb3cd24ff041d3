// exec_check_test.cpp: domino-exec --check passes on both model styles for plans with batch, sequence and
// column splits (and their 2-D combination), with activation recomputation (selective, full: the recomputed
// ops, AllReduces included, run on both ranks as the plan file says), and the comparison it rests on detects
// differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "exec_test_util.hpp"
#include "executor/job/grad_check.hpp"
#include "sim/base/error.hpp"

namespace domino {
namespace {

using namespace exectest;

struct CheckCase {
  const char* model;
  BlockPlan attn, mlp;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::None;
};

void PrintTo(const CheckCase& c, std::ostream* os) {
  auto block = [](const BlockPlan& b) {
    return std::string(to_string(b.dim)) + " p" + std::to_string(b.p) + " q" + std::to_string(b.q) +
           (b.order == SliceOrder::DeepSpeed ? " deepspeed" : "");
  };
  *os << c.model << " attn " << block(c.attn) << ", mlp " << block(c.mlp) << (c.sequence_parallel ? ", sp" : "")
      << (c.recompute == Recompute::None ? "" : std::string(", recompute ") + to_string(c.recompute));
}

std::string case_name(const ::testing::TestParamInfo<CheckCase>& info) {
  return std::string(info.param.model == std::string("tiny-gpt") ? "Gpt" : "Llama") + std::to_string(info.index);
}

class ExecCheck : public ::testing::TestWithParam<CheckCase> {};

TEST_P(ExecCheck, PlanMatchesMegatronSyncAndSingleRank) {
  const CheckCase& c = GetParam();
  TempDir dir;
  ModelOverrides o;
  o.tp = 2;
  const ModelSpec m = load_model(model_file(c.model), o);
  Plan plan = make_uniform_plan(m, c.attn, c.mlp, "custom");
  plan.sequence_parallel = c.sequence_parallel;
  plan.recompute = c.recompute;
  save_plan(plan, dir / "plan.yaml");
  const Outcome out = run({dir / "plan.yaml", "--model", model_file(c.model), "--check"}, dir / "log", 240);
  EXPECT_EQ(out.exit_code, 0) << out.output;
  EXPECT_NE(out.output.find("check passed"), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("L1.mlp.fc2.w.grad"), std::string::npos) << "the table lists every gradient";
  EXPECT_NE(out.output.find("L1.mlp.norm.g.grad"), std::string::npos) << "and the norm gains'";
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
                                           CheckCase{"tiny-llama", kSeq2Col2Ds, kBatch2Ds},
                                           CheckCase{"tiny-gpt", kSeq2Col2, kBatch2, false, Recompute::Selective},
                                           CheckCase{"tiny-llama", kSeq2Col2, kBatch2, false, Recompute::Full}),
                         case_name);

// Every named strategy on both shipped CPU models, shrunk to a short sequence so that the three runs of a
// check take seconds: the vocab-parallel embedding, head and cross-entropy agree with megatron-sync and with
// tp 1 (where the whole vocabulary sits on one rank). no-comm skips every AllReduce, so its ranks cannot
// agree with a reference beyond one rank: it is checked at tp 1, where it must equal megatron-sync.
struct StrategyCase {
  const char* model;
  const char* strategy;
  int tp;
};

void PrintTo(const StrategyCase& c, std::ostream* os) { *os << c.model << " " << c.strategy << " tp " << c.tp; }

class ExecCheckStrategy : public ::testing::TestWithParam<StrategyCase> {};

TEST_P(ExecCheckStrategy, NamedStrategyOnACpuModelMatchesTheReferences) {
  const StrategyCase& c = GetParam();
  TempDir dir;
  const std::string model = std::string(DOMINO_SOURCE_DIR) + "/configs/models/" + c.model + ".yaml";
  const Outcome out = run({model, "--strategy", c.strategy, "--tp", std::to_string(c.tp), "--seq-len", "32",
                           "--micro-batch", "2", "--check"},
                          dir / "log", 240);
  EXPECT_EQ(out.exit_code, 0) << out.output;
  EXPECT_NE(out.output.find("check passed"), std::string::npos) << out.output;
  for (const char* grad : {"emb.tok.grad", "head.w.grad"})
    EXPECT_NE(out.output.find(grad), std::string::npos) << "the table lists the vocab-parallel gradients";
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, ExecCheckStrategy,
    ::testing::Values(
        StrategyCase{"cpu-gpt", "megatron-sync", 2}, StrategyCase{"cpu-gpt", "megatron-async", 2},
        StrategyCase{"cpu-gpt", "domino-ds", 2}, StrategyCase{"cpu-gpt", "no-comm", 1},
        StrategyCase{"cpu-llama", "megatron-sync", 2}, StrategyCase{"cpu-llama", "megatron-async", 2},
        StrategyCase{"cpu-llama", "domino-deep", 2}, StrategyCase{"cpu-llama", "no-comm", 1},
        StrategyCase{"cpu-gpt", "megatron-sp-sync", 2}, StrategyCase{"cpu-gpt", "megatron-sp", 2},
        StrategyCase{"cpu-gpt", "megatron-sp-overlap", 2}, StrategyCase{"cpu-llama", "megatron-sp", 2},
        StrategyCase{"cpu-llama", "megatron-sp-overlap", 2}),
    [](const auto& info) {
      std::string name = std::string(info.param.model) + "_" + info.param.strategy;
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

// tiny-gpt with `vocab_lines` in place of its vocabulary, sliced on `tp` ranks (shards of `per_rank` ids),
// checked against megatron-sync and tp 1: padding ids take no part in the loss, so loss and gradients must
// equal the tp 1 run's whatever each side pads.
void check_padded_vocabulary(const std::string& vocab_lines, int tp, int per_rank) {
  TempDir dir;
  std::string yaml = read_text(model_file("tiny-gpt"));
  const size_t at = yaml.find("vocab: 96");
  ASSERT_NE(at, std::string::npos);
  yaml.replace(at, 9, vocab_lines);
  std::ofstream(dir / "gpt94.yaml") << yaml;
  ModelOverrides o;
  o.tp = tp;
  const ModelSpec m = load_model(dir / "gpt94.yaml", o);
  ASSERT_EQ(m.vocab_per_rank(), per_rank);
  save_plan(make_uniform_plan(m, kSeq2Col2, kBatch2, "custom"), dir / "plan.yaml");
  const Outcome out = run({dir / "plan.yaml", "--model", dir / "gpt94.yaml", "--check"}, dir / "log", 240);
  EXPECT_EQ(out.exit_code, 0) << out.output;
  EXPECT_NE(out.output.find("check passed"), std::string::npos) << out.output;
}

// 4 ranks with a vocabulary 4 does not divide: 4 shards of 24 ids, the last ending in 2 of padding.
TEST(ExecCheckVocab, FourRanksWithAPaddedVocabularyMatchSingleRank) {
  check_padded_vocabulary("vocab: 94", 4, 24);
}

// Megatron's padding of the vocabulary (vocab_divisible_by): 94 ids at tp 2 padded to 2 shards of 64 (the
// second 34 ids of padding), against tp 1's one shard of 96.
TEST(ExecCheckVocab, AVocabularyPaddedToAMultipleMatchesSingleRank) {
  check_padded_vocabulary("vocab: 94\nvocab_divisible_by: 32", 2, 64);
}

const BlockPlan kWhole{SplitDim::Batch, 1, 1, OverlapMode::None, false};
const BlockPlan kSeq2{SplitDim::Sequence, 2, 1, OverlapMode::Inter, true};

// Sequence parallelism end to end: sharded residual stream, AllGather / ReduceScatter on the CPU backend's
// Gloo path, positions by group (GPT), all-reduced norm gradients; one group (p = 1), two and four groups
// (sequence slices), batch slices and column chunks, 2-D along the sequence (slices and chunks together).
INSTANTIATE_TEST_SUITE_P(SequenceParallel, ExecCheck,
                         ::testing::Values(CheckCase{"tiny-gpt", kWhole, kWhole, true},
                                           CheckCase{"tiny-gpt", kSeq2, kSeq2, true},
                                           CheckCase{"tiny-llama", kBatch2, kCol2, true},
                                           CheckCase{"tiny-gpt", kSeq2Col2, kBatch2, true},
                                           CheckCase{"tiny-llama", kSeq2Col2, kSeq4, true},
                                           CheckCase{"tiny-llama", kSeq2, kBatch2, true, Recompute::Selective}),
                         case_name);

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

// Every rank's copy of a replicated gradient must agree (under sequence parallelism only the AllReduce of the
// partial sums makes them); sharded gradients have no copies to disagree.
TEST(ExecCheckMetric, ReplicatedGradientsMustAgreeBetweenRanks) {
  Job job;
  ModelOverrides o;
  o.tp = 2;
  job.model = load_model(model_file("tiny-gpt"), o);
  job.schedule = build_schedule(job.model, make_strategy_plan("megatron-sync", job.model));
  int32_t gain = -1, qkv = -1;
  for (size_t i = 0; i < job.schedule.buffers.size(); ++i) {
    const BufferDesc& b = job.schedule.buffers[i];
    if (b.role != BufferRole::Grad || b.layer != 0) continue;
    if (b.param == ParamKind::AttnNormGamma) gain = int32_t(i);
    if (b.param == ParamKind::QkvWeight) qkv = int32_t(i);
  }
  ASSERT_GE(gain, 0);
  ASSERT_GE(qkv, 0);
  std::vector<RankSnapshot> ranks(2);
  for (int r = 0; r < 2; ++r) {
    ranks[size_t(r)].rank = r;
    ranks[size_t(r)].buffers.resize(job.schedule.buffers.size());
    for (int32_t b : {gain, qkv}) {
      std::vector<float>& v = ranks[size_t(r)].buffers[size_t(b)];
      v.resize(size_t(job.schedule.buffers[size_t(b)].elements()));
      for (size_t k = 0; k < v.size(); ++k) v[k] = 1.0f + 0.01f * float(k) + (b == qkv ? float(r) : 0.0f);
    }
  }
  EXPECT_EQ(replica_disagreement(job, gain, ranks), 0.0);
  EXPECT_EQ(replica_disagreement(job, qkv, ranks), 0.0);  // two different shards: nothing replicated
  ranks[1].buffers[size_t(gain)][3] *= 1.5f;  // rank 1 kept its partial sum of one element
  EXPECT_GT(replica_disagreement(job, gain, ranks), kCheckTolerance);
}

}  // namespace
}  // namespace domino
