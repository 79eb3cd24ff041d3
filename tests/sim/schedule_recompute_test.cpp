// schedule_recompute_test.cpp: activation recomputation in the schedule IR (Plan::recompute): every plan
// builds and verifies under both modes with unique op ids; selective re-runs each attention core right before
// its backward on the same operands; the memory estimate falls by exactly the activations no longer kept
// (computed here from the model's shapes); the predicted iteration grows by at least the recomputed compute;
// the plan key round-trips, bad values and unbuilt combinations are refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>

#include "sim/cost/cost_model.hpp"
#include "sim/engine/simulator.hpp"
#include "tests/sim/schedule_test_util.hpp"

namespace domino {
namespace {

using test::build_verified;

Plan with_mode(Plan plan, Recompute mode) {
  plan.recompute = mode;
  return plan;
}

TEST(Recompute, EveryPlanBuildsVerifiedWithUniqueIds) {
  for (const ModelSpec& m : test::small_models()) {
    std::vector<test::NamedPlan> plans = test::plans_for(m);
    for (const test::NamedPlan& np : test::sp_plans_for(m)) plans.push_back(np);
    for (const test::NamedPlan& np : plans) {
      for (const Recompute mode : {Recompute::Selective, Recompute::Full}) {
        if (mode == Recompute::Full && np.plan.sequence_parallel) continue;  // refused (below)
        SCOPED_TRACE(m.name + " tp" + std::to_string(m.tp) + " " + np.name + " " + to_string(mode));
        const Schedule s = build_verified(m, with_mode(np.plan, mode));
        verify_ops(s);
        std::set<std::string> ids;
        int recomputed = 0;
        for (const Op& op : s.ops) {
          EXPECT_TRUE(ids.insert(op_id(op)).second) << op_id(op);
          recomputed += op.phase == Phase::Recompute;
        }
        EXPECT_GT(recomputed, 0);
      }
    }
  }
}

// Each attention backward follows, on the compute stream, the recomputed core of the same layer and slice,
// which reads the same Q, K, V regions and writes the probabilities the backward reads.
TEST(Recompute, SelectiveRerunsEachAttentionCoreBeforeItsBackward) {
  const ModelSpec m = test::tiny_llama(2);
  const Plan plan = with_mode(
      make_uniform_plan(m, {SplitDim::Sequence, 4, 2, OverlapMode::Inter, true}, {}, "custom"), Recompute::Selective);
  const Schedule s = build_verified(m, plan);
  int cores = 0;
  for (const Op& op : s.ops) {
    if (op.code != OpCode::AttnBwd) continue;
    const Op* prev = nullptr;
    for (int i = op.index - 1; i >= 0 && !prev; --i)
      if (s.ops[size_t(i)].stream == Stream::Compute) prev = &s.ops[size_t(i)];
    ASSERT_NE(prev, nullptr);
    EXPECT_EQ(op_id(*prev), "L" + std::to_string(op.layer) + ".rc.attn.core.s" + std::to_string(op.slice));
    EXPECT_EQ(prev->code, OpCode::AttnFwd);
    for (int k = 0; k < 3; ++k) EXPECT_EQ(prev->in[size_t(k)], op.in[size_t(k)]);
    EXPECT_EQ(prev->out[1], op.in[3]);
    EXPECT_EQ(s.buffers[size_t(op.in[3].buffer)].name, "rc.p" + std::to_string(op.layer % 2) + ".attn.probs");
    ++cores;
  }
  EXPECT_EQ(cores, m.layers * 4);
}

// The activations of one layer, in elements, from the model's shapes: those selective drops (the
// probabilities) and those full drops (all but the layer output x_out).
struct LayerActs {
  int64_t probs, all_but_output;
};

LayerActs layer_activations(const ModelSpec& m) {
  const int64_t B = m.micro_batch, S = m.seq_len, h = m.hidden, d = m.head_dim();
  const int64_t a = m.heads_per_rank(), kv = m.kv_heads_per_rank(), f = m.ffn_per_rank();
  const int64_t fc1 = m.gated() ? 2 * f : f;
  const int64_t per_row = (h + 2) /* attention norm and stats */ + (a + 2 * kv) * d /* qkv */ + a * S /* probs */ +
                          a * d /* ctx */ + h /* x_mid */ + (h + 2) /* MLP norm and stats */ + fc1 + f /* act */;
  return {B * S * a * S, B * S * per_row};
}

TEST(Recompute, MemoryFallsByTheActivationsNoLongerKept) {
  for (const ModelSpec& m : {test::tiny_gpt(2), test::tiny_llama(2), test::tiny_llama(4)}) {
    SCOPED_TRACE(m.name + " tp" + std::to_string(m.tp));
    ASSERT_EQ(m.layers, 3);
    const Plan plan = make_strategy_plan("megatron-sync", m);
    const int64_t none = schedule_memory_bytes(build_verified(m, plan));
    const int64_t sel = schedule_memory_bytes(build_verified(m, with_mode(plan, Recompute::Selective)));
    const int64_t full = schedule_memory_bytes(build_verified(m, with_mode(plan, Recompute::Full)));
    const LayerActs acts = layer_activations(m);
    const int64_t eb = dtype_bytes(m.dtype);
    // Three layers' buffers become two shared ones.
    EXPECT_EQ(none - sel, (m.layers - 2) * acts.probs * eb);
    EXPECT_EQ(none - full, (m.layers - 2) * acts.all_but_output * eb);
  }
}

TEST(Recompute, PredictedTimeGrowsByAtLeastTheRecomputedCompute) {
  ModelSpec m = test::gpt3_13b();
  m.layers = 4;
  const CostModel cost(load_profile((std::filesystem::path(DOMINO_SOURCE_DIR) / "profiles" / "dgx-h100.yaml").string()));
  const Plan sync = make_strategy_plan("megatron-sync", m);
  const Schedule base = build_verified(m, sync);
  const double t0 = simulate(base, cost).iteration_us;
  double layer_fwd = 0;  // the layers' forward compute
  const OpCosts c0 = op_costs(base, cost);
  for (const Op& op : base.ops)
    if (op.phase == Phase::Forward && op.layer >= 0 && op.stream == Stream::Compute) layer_fwd += c0.duration[size_t(op.index)];
  for (const Recompute mode : {Recompute::Selective, Recompute::Full}) {
    SCOPED_TRACE(to_string(mode));
    const Schedule s = build_verified(m, with_mode(sync, mode));
    const OpCosts c = op_costs(s, cost);
    double rc = 0;
    for (const Op& op : s.ops)
      if (op.phase == Phase::Recompute && op.stream == Stream::Compute) rc += c.duration[size_t(op.index)];
    ASSERT_GT(rc, 0);
    // megatron-sync overlaps nothing: every recomputed compute op adds its time.
    EXPECT_GE(simulate(s, cost).iteration_us - t0, 0.999 * rc);
    // Full: the forward but the MLP's second GEMM and add (a third of its GEMM FLOPs, left out by design).
    if (mode == Recompute::Full) {
      EXPECT_GT(rc, 0.6 * layer_fwd);
      EXPECT_LT(rc, layer_fwd);
    } else {
      EXPECT_LT(rc, 0.5 * layer_fwd);
    }
  }
}

TEST(Recompute, PlanKeyRoundTripsAndBadValuesAreRefusedWithTheLine) {
  const ModelSpec m = test::tiny_gpt(2);
  const Plan none = make_strategy_plan("domino-deep", m);
  EXPECT_EQ(plan_to_yaml(none).find("recompute"), std::string::npos) << "plans without it keep their bytes";
  const std::string yaml = plan_to_yaml(with_mode(none, Recompute::Full));
  const size_t at = yaml.find("recompute: full\n");
  ASSERT_NE(at, std::string::npos) << yaml;
  EXPECT_EQ(load_plan_string(yaml, "p.yaml", m).recompute, Recompute::Full);
  std::string bad = yaml;
  bad.replace(at, std::string("recompute: full").size(), "recompute: partial");
  const int line = 1 + int(std::count(yaml.begin(), yaml.begin() + std::ptrdiff_t(at), '\n'));
  try {
    load_plan_string(bad, "p.yaml", m);
    ADD_FAILURE() << "a bad recompute value loads";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find("p.yaml:" + std::to_string(line) + ":"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'partial' is not one of none, selective, full"), std::string::npos) << e.what();
  }
}

TEST(Recompute, PlansMadeForAModelTakeItsTrainingContext) {
  ModelSpec m = test::tiny_gpt(2);
  m.training.recompute = Recompute::Selective;
  EXPECT_EQ(make_strategy_plan("megatron-async", m).recompute, Recompute::Selective);
}

TEST(Recompute, FullIsRefusedByNameWhereItIsNotBuilt) {
  const ModelSpec m = test::tiny_gpt(2);
  Plan sp = with_mode(make_strategy_plan("megatron-sp", m), Recompute::Full);
  EXPECT_THROW(
      try { validate_plan(sp, m); } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("recompute: full is not built with sequence parallelism"), std::string::npos);
        throw;
      },
      Error);
  ModelSpec post = test::tiny_gpt(2);
  post.norm_placement = NormPlacement::Post, post.set_biases(false);
  const Plan p = with_mode(make_strategy_plan("megatron-sync", post), Recompute::Full);
  EXPECT_THROW(
      try { build_schedule(post, p); } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("post-norm blocks"), std::string::npos) << e.what();
        throw;
      },
      Error);
  EXPECT_NO_THROW(build_verified(post, with_mode(p, Recompute::Selective)));
}

}  // namespace
}  // namespace domino
