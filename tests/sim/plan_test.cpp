// plan_test.cpp: named strategies, plan validation, plan files (round trip, byte-identical output, ranges)
// and the corpus of bad plan files in tests/data/plans/bad, each with its pinned, located message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "sim/base/error.hpp"
#include "tests/sim/schedule_test_util.hpp"

namespace domino {
namespace {

namespace fs = std::filesystem;
const fs::path kPlans = fs::path(DOMINO_TEST_DATA) / "data" / "plans";


std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path temp_dir() {
  const fs::path d = fs::temp_directory_path() / ("domino-plan-test-" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    return e.what();
  }
  return "<no error>";
}

TEST(Strategies, ExpandAsDocumented) {
  const ModelSpec m = test::tiny_gpt();
  EXPECT_EQ(strategy_names(),
            (std::vector<std::string>{"megatron-sync", "megatron-async", "domino-ds", "domino-deep",
                                      "no-comm", "megatron-sp-sync", "megatron-sp", "megatron-sp-overlap"}));
  const Plan sync = make_strategy_plan("megatron-sync", m);
  const Plan async = make_strategy_plan("megatron-async", m);
  const Plan ds = make_strategy_plan("domino-ds", m);
  const Plan deep = make_strategy_plan("domino-deep", m);
  const Plan bound = make_strategy_plan("no-comm", m);
  ASSERT_EQ(ds.layers.size(), size_t(m.layers));
  for (size_t l = 0; l < ds.layers.size(); ++l) {
    EXPECT_EQ(sync.layers[l].attn, (BlockPlan{SplitDim::Batch, 1, 1, OverlapMode::None, false}));
    EXPECT_EQ(async.layers[l].mlp, (BlockPlan{SplitDim::Batch, 1, 1, OverlapMode::None, true}));
    EXPECT_EQ(ds.layers[l].attn,
              (BlockPlan{SplitDim::Batch, 2, 1, OverlapMode::Inter, true, SliceOrder::DeepSpeed}));
    EXPECT_EQ(ds.layers[l].mlp, ds.layers[l].attn);
    EXPECT_EQ(deep.layers[l].attn, (BlockPlan{SplitDim::Batch, 2, 1, OverlapMode::Inter, true, SliceOrder::Deep}));
    EXPECT_EQ(deep.layers[l].mlp, deep.layers[l].attn);
    EXPECT_EQ(bound.layers[l], sync.layers[l]);
  }
  const Plan sp_sync = make_strategy_plan("megatron-sp-sync", m);
  const Plan sp = make_strategy_plan("megatron-sp", m);
  const Plan overlap = make_strategy_plan("megatron-sp-overlap", m);
  EXPECT_EQ(sp_sync.layers, sync.layers);
  EXPECT_EQ(sp.layers, async.layers);
  BlockPlan pipelined = async.layers[0].attn;
  pipelined.pipeline = 4;
  EXPECT_EQ(overlap.layers[0].attn, pipelined);
  EXPECT_EQ(overlap.layers[2].mlp, pipelined);
  EXPECT_TRUE(sp_sync.sequence_parallel && sp.sequence_parallel && overlap.sequence_parallel);
  EXPECT_FALSE(async.sequence_parallel || ds.sequence_parallel || bound.sequence_parallel);
  EXPECT_EQ(sp_group_count(sp), 1);
  EXPECT_EQ(sp_group_count(overlap), 4);
  EXPECT_TRUE(sync.comm_enabled);
  EXPECT_FALSE(bound.comm_enabled);
  EXPECT_EQ(ds.strategy, "domino-ds");
  EXPECT_EQ(ds.model_fingerprint, model_fingerprint(m));
  EXPECT_EQ(ds.tp, m.tp);
}

TEST(Strategies, BadNamesAndModels) {
  ModelSpec m = test::tiny_gpt();
  EXPECT_NE(error_of([&] { make_strategy_plan("megatron-snyc", m); }).find("did you mean 'megatron-sync'"),
            std::string::npos);
  m.micro_batch = 3;
  const std::string e = error_of([&] { make_strategy_plan("domino-ds", m); });
  EXPECT_NE(e.find("micro_batch 3 (odd)"), std::string::npos) << e;
  EXPECT_NO_THROW(make_strategy_plan("megatron-sync", m));
}

TEST(ValidatePlan, NamesTheLayerAndBlock) {
  const ModelSpec m = test::plan_files_model();
  Plan p = make_strategy_plan("megatron-sync", m);
  p.layers[1].mlp.q = 4;
  EXPECT_EQ(error_of([&] { validate_plan(p, m); }), "plan layer 1 mlp: q=4 does not divide hidden 42");
  p = make_strategy_plan("megatron-sync", m);
  p.layers.resize(5);
  EXPECT_NE(error_of([&] { validate_plan(p, m); }).find("5 layer entries"), std::string::npos);
  p = make_strategy_plan("megatron-sync", m);
  ModelSpec other = m;
  other.tp = 3;
  other.heads = 6;
  EXPECT_NE(error_of([&] { validate_plan(p, other); }).find("tp 2, not tp 3"), std::string::npos);
  EXPECT_NO_THROW(validate_plan(p, other, /*force=*/true));
  ModelSpec wider = m;
  wider.ffn_hidden = 168;
  EXPECT_NE(error_of([&] { validate_plan(p, wider); }).find("another shape"), std::string::npos);
}

TEST(PlanFile, RoundTripsEveryPlan) {
  const fs::path dir = temp_dir();
  for (const ModelSpec& m : {test::tiny_gpt(), test::tiny_llama()}) {
    for (auto np : test::plans_for(m)) {
      np.plan.profile = "dgx-h100";
      np.plan.provenance = {
          {"tuner", "domino-tune 0.1.0"}, {"note", "quotes \" and \\ and: colons"}, {"empty", ""}};
      const fs::path f = dir / (np.name + ".yaml");
      save_plan(np.plan, f.string());
      const Plan back = load_plan(f.string(), m);
      EXPECT_EQ(back.layers, np.plan.layers) << np.name;
      EXPECT_EQ(back.provenance, np.plan.provenance) << np.name;
      EXPECT_EQ(back.comm_enabled, np.plan.comm_enabled) << np.name;
      EXPECT_EQ(back.sequence_parallel, np.plan.sequence_parallel) << np.name;
      EXPECT_EQ(back.strategy, np.plan.strategy);
      EXPECT_EQ(back.profile, "dgx-h100");
      EXPECT_EQ(back.model_fingerprint, np.plan.model_fingerprint);
      EXPECT_EQ(plan_to_yaml(back), read_text(f)) << np.name << ": output is not byte-identical";
      save_plan(back, f.string());
      EXPECT_EQ(plan_to_yaml(np.plan), read_text(f));
    }
  }
  fs::remove_all(dir);
}

TEST(PlanFile, FoldsIdenticalLayersIntoRanges) {
  const ModelSpec m = test::llama2_70b();
  Plan p = make_strategy_plan("domino-deep", m);
  std::string y = plan_to_yaml(p);
  EXPECT_NE(y.find("  - layers: 0-79\n"), std::string::npos) << y;
  EXPECT_EQ(std::count(y.begin(), y.end(), '\n'), 14) << y;
  p.layers[40].mlp.q = 2;
  y = plan_to_yaml(p);
  EXPECT_NE(y.find("layers: 0-39\n"), std::string::npos);
  EXPECT_NE(y.find("layers: 40\n"), std::string::npos);
  EXPECT_NE(y.find("layers: 41-79\n"), std::string::npos);
}

// The order key: read with its default, written only when not the default (plans in the deep order keep
// the bytes they had before the key existed).
TEST(PlanFile, OrderKeyRoundTrips) {
  const ModelSpec m = test::tiny_gpt();
  const fs::path dir = temp_dir();
  const fs::path f = dir / "order.yaml";
  const Plan given = make_strategy_plan("domino-ds", m);
  std::string y = plan_to_yaml(given);
  for (const char* line : {"attn: {split: batch, p: 2, q: 1, overlap: inter, bwd_overlap: true, order: deepspeed}\n",
                           "mlp: {split: batch, p: 2, q: 1, overlap: inter, bwd_overlap: true, order: deepspeed}\n"})
    EXPECT_NE(y.find(line), std::string::npos) << y;
  EXPECT_EQ(plan_to_yaml(make_strategy_plan("domino-deep", m)).find("order"), std::string::npos);
  // Explicit "order: deep" reads as the default and is written without the key.
  const std::string deep_explicit = std::string("format_version: 1\nmodel: {name: \"tiny-gpt\", fingerprint: \"") +
                                    model_fingerprint(m) + "\"}\ntp: 2\nlayers:\n" +
                                    "  - {layers: 0-2, attn: {p: 2, overlap: inter, order: deep}, "
                                    "mlp: {p: 2, q: 2, order: deepspeed}}\n";
  std::ofstream(f) << deep_explicit;
  const Plan back = load_plan(f.string(), m);
  EXPECT_EQ(back.layers[1].attn.order, SliceOrder::Deep);
  EXPECT_EQ(back.layers[1].mlp, (BlockPlan{SplitDim::Batch, 2, 2, OverlapMode::None, false, SliceOrder::DeepSpeed}));
  y = plan_to_yaml(back);
  EXPECT_NE(y.find("attn: {split: batch, p: 2, q: 1, overlap: inter, bwd_overlap: false}\n"), std::string::npos) << y;
  EXPECT_NE(y.find("mlp: {split: batch, p: 2, q: 2, overlap: none, bwd_overlap: false, order: deepspeed}\n"),
            std::string::npos)
      << y;
  save_plan(given, f.string());
  EXPECT_EQ(load_plan(f.string(), m).layers, given.layers);
  fs::remove_all(dir);
}

// The pipeline key and sequence_parallel: read with their defaults, written only when not the default.
TEST(PlanFile, SequenceParallelKeysRoundTrip) {
  const ModelSpec m = test::tiny_gpt();
  for (const char* name : {"megatron-sync", "domino-deep"})
    EXPECT_EQ(plan_to_yaml(make_strategy_plan(name, m)).find("pipeline"), std::string::npos);
  const Plan overlap = make_strategy_plan("megatron-sp-overlap", m);
  const std::string y = plan_to_yaml(overlap);
  EXPECT_NE(y.find("sequence_parallel: true\n"), std::string::npos) << y;
  EXPECT_NE(y.find("attn: {split: batch, p: 1, q: 1, overlap: none, bwd_overlap: true, pipeline: 4}\n"),
            std::string::npos)
      << y;
  const Plan back = load_plan_string(y, "<overlap>", m);
  EXPECT_EQ(back.layers, overlap.layers);
  EXPECT_TRUE(back.sequence_parallel);
  // A pipeline without sequence parallelism, or on a sliced block, names the key.
  std::string no_sp = y;
  no_sp.erase(no_sp.find("sequence_parallel: true\n"), std::string("sequence_parallel: true\n").size());
  EXPECT_NE(error_of([&] { load_plan_string(no_sp, "<no-sp>", m); }).find("needs sequence_parallel: true"),
            std::string::npos);
  std::string sliced = y;
  sliced.replace(sliced.find("p: 1, q: 1"), 10, "p: 2, q: 1");
  EXPECT_NE(error_of([&] {
              load_plan_string(sliced, "<sliced>", m);
            }).find("pipeline=4 chunks the GEMMs of an unsliced block"),
            std::string::npos);
}

TEST(PlanFile, GoodFilesLoad) {
  const ModelSpec m = test::plan_files_model();
  const Plan p = load_plan((kPlans / "good" / "mixed-ranges.yaml").string(), m, /*force=*/true);
  EXPECT_EQ(p.layers[0].attn, (BlockPlan{SplitDim::Batch, 2, 2, OverlapMode::Inter, true}));
  EXPECT_EQ(p.layers[1].mlp, (BlockPlan{SplitDim::Sequence, 4, 1, OverlapMode::Intra, false}));
  EXPECT_EQ(p.layers[2].attn, BlockPlan{});
  EXPECT_EQ(p.layers[2].mlp, (BlockPlan{SplitDim::Batch, 2, 1, OverlapMode::None, false}));
  EXPECT_EQ(p.profile, "dgx-h100");
  EXPECT_EQ(p.provenance.at("predicted_us"), "1234.5");
  EXPECT_NO_THROW(test::build_verified(m, p));
  const Plan q = load_plan((kPlans / "good" / "minimal.yaml").string(), m, /*force=*/true);
  EXPECT_EQ(q.strategy, "custom");
  EXPECT_TRUE(q.comm_enabled);
  EXPECT_TRUE(q.provenance.empty());
  // Without --force the plan's fingerprint must match this model's.
  EXPECT_NE(
      error_of([&] { load_plan((kPlans / "good" / "minimal.yaml").string(), m); }).find("another shape"),
      std::string::npos);
}

std::vector<std::string> bad_corpus() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(kPlans / "bad")) {
    if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

class BadPlan : public ::testing::TestWithParam<std::string> {};

TEST(BadPlanCorpus, IsLargeEnough) { EXPECT_GE(bad_corpus().size(), 20u); }

// NAME.expect holds the exact message, with the path reduced to the file name.
TEST_P(BadPlan, FailsWithItsPinnedMessage) {
  const fs::path input = kPlans / "bad" / (GetParam() + ".yaml");
  std::string expected = read_text(fs::path(input).replace_extension(".expect"));
  ASSERT_FALSE(expected.empty()) << "no .expect sidecar for " << GetParam();
  while (!expected.empty() && expected.back() == '\n') expected.pop_back();
  std::string message = error_of([&] { load_plan(input.string(), test::plan_files_model()); });
  const std::string dir = input.parent_path().string() + "/";
  if (message.rfind(dir, 0) == 0) message = message.substr(dir.size());
  EXPECT_EQ(message, expected);
}

INSTANTIATE_TEST_SUITE_P(Corpus, BadPlan, ::testing::ValuesIn(bad_corpus()), [](const auto& info) {
  std::string n = info.param;
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
});

}  // namespace
}  // namespace domino

namespace domino {
namespace {

TEST(SlicesStrategy, ParsesCountsAndDimension) {
  ModelSpec m = test::tiny_gpt();
  const Plan a = make_strategy_plan("slices:4", m);
  EXPECT_EQ(a.layers[0].attn.p, 4);
  EXPECT_EQ(a.layers[0].attn.q, 1);
  EXPECT_EQ(a.layers[0].mlp.dim, SplitDim::Batch);
  EXPECT_EQ(a.layers[0].mlp.overlap, OverlapMode::Inter);
  const Plan b = make_strategy_plan("slices:2x2:sequence", m);
  EXPECT_EQ(b.layers[1].mlp.p, 2);
  EXPECT_EQ(b.layers[1].mlp.q, 2);
  EXPECT_EQ(b.layers[1].attn.dim, SplitDim::Sequence);
}

TEST(SlicesStrategy, RejectsMalformedAndImpossibleSpecs) {
  ModelSpec m = test::tiny_gpt();
  for (const char* bad : {"slices:", "slices:4y2", "slices:2x", "slices:2:rows", "slices:3", "slices:2x3"}) {
    try {
      make_strategy_plan(bad, m);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadInput) << bad;
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

// A comm-off run is its plan's slicing, order and sequence parallelism with every collective removed: the
// same compute ops, none of the communication.
TEST(CommOffRun, KeepsTheSlicingAndDropsEveryCollective) {
  ModelSpec m = test::tiny_gpt();
  for (const char* name : {"slices:2x2:sequence", "domino-deep", "megatron-sp-overlap"}) {
    const Plan plan = make_strategy_plan(name, m);
    const Plan off = make_strategy_plan(std::string(name) + "+no-comm", m);
    EXPECT_FALSE(off.comm_enabled) << name;
    EXPECT_EQ(off.strategy, std::string(name) + "+no-comm");
    EXPECT_EQ(off.sequence_parallel, plan.sequence_parallel) << name;
    EXPECT_EQ(off.layers[0].mlp.p, plan.layers[0].mlp.p) << name;
    const Schedule with = build_schedule(m, plan), without = build_schedule(m, off);
    std::vector<std::string> compute_with, compute_without;
    for (const Op& op : with.ops)
      if (!collective(op.kind)) compute_with.push_back(op.name);
    for (const Op& op : without.ops) {
      EXPECT_FALSE(collective(op.kind)) << name << ": " << op.name;
      compute_without.push_back(op.name);
    }
    EXPECT_EQ(compute_with, compute_without) << name;
  }
}

TEST(CommOffRun, RefusesAPlanWithoutCommunicationAndUnknownNames) {
  ModelSpec m = test::tiny_gpt();
  for (const char* bad : {"no-comm+no-comm", "nonsense+no-comm", "+no-comm"}) {
    try {
      make_strategy_plan(bad, m);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadInput) << bad;
    }
  }
}

}  // namespace
}  // namespace domino
