// schedule_structure_test.cpp: block structure in the schedule. Parallel blocks (GPT-J, GPT-NeoX, Falcon):
// the MLP's front and the attention's backward no longer wait for the other block's AllReduce, which the
// simulator turns into hidden communication; a shared norm feeds both blocks. Post and sandwich norms
// (OLMo 2, Gemma 2): a norm on the reduced block output, saved per layer; column splits are refused.
#include <gtest/gtest.h>

#include <deque>
#include <filesystem>
#include <string>
#include <vector>

#include "sim/cost/profile.hpp"
#include "sim/engine/simulator.hpp"
#include "sim/model/model_check.hpp"
#include "tests/sim/schedule_index.hpp"
#include "tests/sim/schedule_test_util.hpp"

namespace domino {
namespace {

using Indexed = test::IndexedSchedule;

ModelSpec parallel_gpt(bool shared, int tp = 2) {
  ModelSpec m = test::tiny_gpt(tp);
  m.name = shared ? "tiny-parallel-shared" : "tiny-parallel";
  m.residual = Residual::Parallel;
  m.shared_norm = shared;
  return m;
}

ModelSpec post_llama(NormPlacement placement) {
  ModelSpec m = test::tiny_llama();
  m.name = placement == NormPlacement::Post ? "tiny-post" : "tiny-sandwich";
  m.norm_placement = placement;
  return m;
}

bool reads(const Op& op, int32_t buffer) {
  for (int i = 0; i < op.n_in; ++i)
    if (op.in[size_t(i)].buffer == buffer) return true;
  return false;
}

int32_t buffer_id(const Schedule& s, const std::string& name) {
  for (size_t i = 0; i < s.buffers.size(); ++i)
    if (s.buffers[i].name == name) return int32_t(i);
  throw std::runtime_error("no buffer " + name);
}

TEST(ScheduleStructure, ParallelMlpFrontDoesNotWaitForTheAttentionAllReduce) {
  for (const char* strategy : {"slices:1", "domino-deep"}) {
    const ModelSpec seq = test::tiny_gpt();
    const int last = make_strategy_plan(strategy, seq).layers[1].mlp.p - 1;
    const std::string ar = "L1.fwd.attn.ar.s" + std::to_string(last);
    const std::string fc1 = "L1.fwd.mlp.fc1.s" + std::to_string(last);
    const Indexed s(test::build_verified(seq, make_strategy_plan(strategy, seq)));
    EXPECT_TRUE(s.reaches(ar, fc1)) << strategy;
    for (const bool shared : {false, true}) {
      const ModelSpec m = parallel_gpt(shared);
      const Indexed p(test::build_verified(m, make_strategy_plan(strategy, m)));
      for (int i = 0; i <= last; ++i) {
        EXPECT_FALSE(p.reaches("L1.fwd.attn.ar.s" + std::to_string(i), fc1))
            << strategy << " shared " << shared;
      }
      // The MLP's add of the same rows still follows the attention's (x_out = x_mid + mlp).
      EXPECT_LT(p.pos("L1.fwd.attn.add.s0"), p.pos("L1.fwd.mlp.add.s0")) << strategy;
    }
  }
}

TEST(ScheduleStructure, ParallelAttentionBackwardDoesNotWaitForTheMlpAllReduce) {
  // megatron-async is left out: there the compute op after the wgrad waits for its AllReduce by design.
  for (const char* strategy : {"slices:1", "domino-deep"}) {
    const ModelSpec seq = test::tiny_gpt();
    const Indexed s(test::build_verified(seq, make_strategy_plan(strategy, seq)));
    const int last = make_strategy_plan(strategy, seq).layers[1].attn.p - 1;
    const std::string dgrad = "L1.bwd.attn.proj.dgrad.s" + std::to_string(last);
    const std::string ar = "L1.bwd.mlp.ar.s" + std::to_string(last);
    EXPECT_TRUE(s.reaches(ar, dgrad)) << strategy;
    for (const bool shared : {false, true}) {
      const ModelSpec m = parallel_gpt(shared);
      const Indexed p(test::build_verified(m, make_strategy_plan(strategy, m)));
      EXPECT_FALSE(p.reaches(ar, dgrad)) << strategy << " shared " << shared;
      // The MLP's norm backward adds into d(x_in) only after the attention read d(x_out) there.
      EXPECT_LT(p.pos("L1.bwd.attn.proj.wgrad.s0"), p.pos("L1.bwd.mlp.norm.bwd.s0")) << strategy;
    }
  }
}

TEST(ScheduleStructure, ParallelBlocksReadTheLayerInput) {
  const ModelSpec sep = parallel_gpt(false);
  const Indexed p(test::build_verified(sep, make_strategy_plan("domino-deep", sep)));
  EXPECT_TRUE(reads(p.op("L1.fwd.mlp.norm.s0"), buffer_id(p.s, "L0.x_out")));
  EXPECT_TRUE(reads(p.op("L1.bwd.mlp.norm.bwd.s0"), buffer_id(p.s, "L0.x_out")));

  const ModelSpec sh = parallel_gpt(true);
  const Indexed q(test::build_verified(sh, make_strategy_plan("domino-deep", sh)));
  EXPECT_EQ(q.at.count("L1.fwd.mlp.norm.s0"), 0u);
  EXPECT_TRUE(reads(q.op("L1.fwd.mlp.fc1.s0"), buffer_id(q.s, "L1.attn.norm.y")));
  EXPECT_TRUE(reads(q.op("L1.bwd.mlp.fc1.wgrad.s0"), buffer_id(q.s, "L1.attn.norm.y")));
  // The shared norm's two backwards write one gamma gradient: exactly one of them overwrites.
  const int32_t dgamma = buffer_id(q.s, "L1.attn.norm.g.grad");
  int overwrites = 0, writers = 0;
  for (const Op& op : q.s.ops) {
    if (op.code != OpCode::LayerNormBwd || op.out[1].buffer != dgamma) continue;
    ++writers;
    if (!op.attrs.accumulate_params) {
      ++overwrites;
      EXPECT_EQ(writers, 1) << op_id(op) << " overwrites what an earlier norm backward wrote";
    }
  }
  EXPECT_EQ(writers, 4);  // two slices, two blocks
  EXPECT_EQ(overwrites, 1);
}

// The point of parallel blocks: with the same plan, more of the communication hides behind compute.
TEST(ScheduleStructure, ParallelBlocksHideMoreCommunication) {
  const CostModel cm(
      load_profile((std::filesystem::path(DOMINO_SOURCE_DIR) / "profiles" / "dgx-h100.yaml").string()));
  ModelSpec seq = test::gpt3_13b();
  seq.layers = 4;
  for (const char* strategy : {"slices:1", "domino-deep"}) {
    for (const bool shared : {false, true}) {
      ModelSpec par = seq;
      par.residual = Residual::Parallel, par.shared_norm = shared;
      const SimResult a = simulate(build_schedule(seq, make_strategy_plan(strategy, seq)), cm);
      const SimResult b = simulate(build_schedule(par, make_strategy_plan(strategy, par)), cm);
      EXPECT_LT(b.exposed_comm_us, a.exposed_comm_us) << strategy << " shared " << shared;
      EXPECT_LT(b.iteration_us, a.iteration_us) << strategy << " shared " << shared;
    }
  }
}

TEST(ScheduleStructure, ParallelBlocksRefuseDeepSpeedOrder) {
  const ModelSpec m = parallel_gpt(false);
  EXPECT_THROW(make_strategy_plan("domino-ds", m), Error);
  const std::string yaml = "format_version: 1\nmodel: {name: " + m.name +
                           ", fingerprint: \"0\"}\ntp: 2\nlayers:\n"
                           "  - {layers: 0-2, attn: {p: 2, overlap: inter, order: deepspeed}, mlp: {p: 2}}\n";
  try {
    load_plan_string(yaml, "par.yaml", m, /*force=*/true);
    ADD_FAILURE() << "order: deepspeed accepted for parallel blocks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("parallel"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("order"), std::string::npos) << e.what();
  }
}

TEST(ScheduleStructure, ScheduleHoldsTheParametersTheModelCounts) {
  const std::vector<ModelSpec> models = {parallel_gpt(false), parallel_gpt(true),
                                         post_llama(NormPlacement::Post),
                                         post_llama(NormPlacement::Sandwich)};
  for (const ModelSpec& m : models) {
    const Schedule s = test::build_verified(m, make_strategy_plan("megatron-sync", m));
    int64_t params = 0;
    for (const BufferDesc& b : s.buffers)
      if (b.role == BufferRole::Param) params += b.elements();
    EXPECT_EQ(params, derive_facts(m).params_per_rank) << m.name;
  }
}

TEST(ScheduleStructure, PostNormNormalisesTheReducedOutputBeforeTheAdd) {
  for (const NormPlacement placement : {NormPlacement::Post, NormPlacement::Sandwich}) {
    const ModelSpec m = post_llama(placement);
    const Indexed x(test::build_verified(m, make_strategy_plan("domino-deep", m)));
    const bool sandwich = placement == NormPlacement::Sandwich;
    EXPECT_EQ(x.at.count("L1.fwd.attn.norm.s0"), sandwich ? 1u : 0u);
    EXPECT_EQ(x.at.count("L1.fwd.mlp.norm.s1"), sandwich ? 1u : 0u);
    // Post only: the GEMMs read the residual stream itself.
    if (!sandwich) {
      EXPECT_TRUE(reads(x.op("L1.fwd.mlp.fc1.s0"), buffer_id(x.s, "L1.x_mid")));
    }
    for (const char* block : {"attn", "mlp"}) {
      const std::string b = std::string("L1.fwd.") + block;
      EXPECT_TRUE(x.waits(b + ".post.norm.s0", b + ".ar.s0")) << block;
      EXPECT_EQ(x.pos(b + ".post.norm.s0") + 1, x.pos(b + ".add.s0")) << block;
      const int32_t saved = buffer_id(x.s, std::string("L1.") + block + ".post.norm.x.s0");
      EXPECT_TRUE(reads(x.op(b + ".post.norm.s0"), saved));
      EXPECT_EQ(x.s.buffers[size_t(saved)].role, BufferRole::Activation);
      // Backward: the post norm's backward feeds the row-parallel dgrad.
      const std::string bw = std::string("L1.bwd.") + block;
      EXPECT_TRUE(reads(x.op(bw + ".post.norm.bwd.s1"),
                        buffer_id(x.s, std::string("L1.") + block + ".post.norm.x.s1")));
      EXPECT_LT(x.pos(bw + ".post.norm.bwd.s1"),
                x.pos(bw + (block[0] == 'a' ? ".proj.dgrad.s1" : ".fc2.dgrad.s1")));
    }
    // Without a pre-norm the input gradient is added to the residual gradient by a plain add.
    EXPECT_EQ(x.at.count("L1.bwd.attn.add.bwd.s0"), sandwich ? 0u : 1u);
  }
}

// What one more layer costs: with post norms, per block also the saved reduced output and (sandwich) its
// normalisation, [B, S, h] each.
TEST(ScheduleStructure, PostNormMemoryCountsTheSavedOutputs) {
  const auto per_layer = [](ModelSpec m) {
    const int64_t at3 = schedule_memory_bytes(build_schedule(m, make_strategy_plan("megatron-sync", m)));
    m.layers = 4;
    return schedule_memory_bytes(build_schedule(m, make_strategy_plan("megatron-sync", m))) - at3;
  };
  const ModelSpec pre = test::tiny_llama();
  // Post replaces the pre-norm outputs by the post-norm ones: what remains is the saved reduced outputs.
  const int64_t saved = 2 * int64_t(pre.micro_batch) * pre.seq_len * pre.hidden * dtype_bytes(pre.dtype);
  EXPECT_GE(per_layer(post_llama(NormPlacement::Sandwich)) - per_layer(pre), 2 * saved);
  EXPECT_GE(per_layer(post_llama(NormPlacement::Post)) - per_layer(pre), saved);
}

TEST(ScheduleStructure, PostNormRefusesColumnSplits) {
  for (const NormPlacement placement : {NormPlacement::Post, NormPlacement::Sandwich}) {
    const ModelSpec m = post_llama(placement);
    try {
      make_strategy_plan("slices:2x2", m);
      ADD_FAILURE() << "q = 2 accepted for " << to_string(placement) << " norms";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("q=2"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(to_string(placement)), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(make_strategy_plan("slices:2", m));
  }
  EXPECT_NO_THROW(make_strategy_plan("slices:2x2", test::tiny_llama()));
}

TEST(ScheduleStructure, UnmodelledCombinationsAreRefused) {
  ModelSpec m = parallel_gpt(false);
  m.norm_placement = NormPlacement::Sandwich;
  m.set_biases(false);
  ASSERT_TRUE(check_model(m).has_value());
  EXPECT_EQ(check_model(m)->key, "norm_placement");
  EXPECT_NE(check_model(m)->message.find("parallel"), std::string::npos);
  ModelSpec biased = post_llama(NormPlacement::Post);
  biased.proj_bias = true;
  ASSERT_TRUE(check_model(biased).has_value());
  EXPECT_NE(check_model(biased)->message.find("bias"), std::string::npos);
  EXPECT_FALSE(check_model(post_llama(NormPlacement::Post)).has_value());
}

}  // namespace
}  // namespace domino
