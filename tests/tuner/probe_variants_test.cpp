// probe_variants_test.cpp: the schedule a class representative's build patched with a member's policy deps
// equals, op for op and buffer for buffer, what build_schedule makes of the member's plan, and so do the
// waits of a simulation program of the build with those deps added; on models of
// every block structure the tuner sees (pre, post and sandwich norms, parallel blocks, both orders).
#include "tuner/probe_variants.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <tuple>
#include <string>

#include "sim/engine/sim_program.hpp"
#include "tests/tuner/tuner_test_util.hpp"
#include "tuner/segment_costs.hpp"

namespace domino {
namespace {

using namespace test;

// Every field of OpAttrs (a byte comparison would also compare the padding between them, which nothing sets).
auto attrs_fields(const OpAttrs& t) {
  return std::tie(t.accumulate, t.accumulate_params, t.heads, t.kv_heads, t.head_dim, t.chunks, t.eps,
                  t.weight_decay, t.reduce, t.vocab, t.window, t.overwrite_end, t.rotary_dims, t.sp_groups,
                  t.row_blocks);
}
static_assert(sizeof(OpAttrs) == 40, "OpAttrs changed: list its new fields in attrs_fields");

// Every field of two ops; the failure names the op.
void expect_same_op(const Op& a, const Op& b) {
  const std::string id = op_id(b);
  EXPECT_EQ(op_id(a), id);
  EXPECT_EQ(a.index, b.index) << id;
  EXPECT_EQ(a.phase, b.phase) << id;
  EXPECT_EQ(a.kind, b.kind) << id;
  EXPECT_EQ(a.code, b.code) << id;
  EXPECT_EQ(a.stream, b.stream) << id;
  EXPECT_TRUE(attrs_fields(a.attrs) == attrs_fields(b.attrs)) << id;
  EXPECT_EQ(a.n_in, b.n_in) << id;
  EXPECT_EQ(a.n_out, b.n_out) << id;
  EXPECT_EQ(a.in, b.in) << id;
  EXPECT_EQ(a.out, b.out) << id;
  EXPECT_EQ(a.m, b.m) << id;
  EXPECT_EQ(a.n, b.n) << id;
  EXPECT_EQ(a.k, b.k) << id;
  EXPECT_EQ(a.flops, b.flops) << id;
  EXPECT_EQ(a.bytes, b.bytes) << id;
  EXPECT_EQ(a.dtype, b.dtype) << id;
  EXPECT_EQ(a.deps, b.deps) << id;
}

void expect_same_schedule(const Schedule& a, const Schedule& b) {
  EXPECT_EQ(a.plan.layers, b.plan.layers);
  ASSERT_EQ(a.buffers.size(), b.buffers.size());
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    const BufferDesc &x = a.buffers[i], &y = b.buffers[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(std::tie(x.role, x.param, x.layer, x.batch, x.seq, x.cols),
              std::tie(y.role, y.param, y.layer, y.batch, y.seq, y.cols))
        << x.name;
  }
  ASSERT_EQ(a.ops.size(), b.ops.size());
  for (size_t i = 0; i < a.ops.size(); ++i) expect_same_op(a.ops[i], b.ops[i]);
}

struct VariantCase {
  std::string name, model;
  NormPlacement norms;
  Residual residual;
  std::vector<SliceOrder> orders;
};

void PrintTo(const VariantCase& c, std::ostream* os) { *os << c.name; }

class ProbeVariantsMatchTheBuilder : public ::testing::TestWithParam<VariantCase> {};

TEST_P(ProbeVariantsMatchTheBuilder, EveryPolicyOfTwoNeighbouringBlocks) {
  const VariantCase& c = GetParam();
  ModelSpec m = shipped_model(c.model, 2, 2);
  m.norm_placement = c.norms;
  m.residual = c.residual;
  validate_model(m);
  const SearchSpace space = make_search_space(
      m, search_options({kBatch, kSeq}, {1, 2, 4}, {1, 2}, {kNone, kIntra, kInter}, {false, true}, c.orders));
  const LayerPlan ref{space.attn.front(), space.mlp.front()};
  int compared = 0;
  for (int k = 0; k < 3; ++k) {  // attn 0 -> mlp 0, mlp 0 -> attn 1, attn 1 -> mlp 1
    const auto& left = k % 2 == 0 ? space.attn : space.mlp;
    const auto& right = k % 2 == 0 ? space.mlp : space.attn;
    for (size_t i = 0; i < 24; ++i) {
      const BlockPlan& a = left[(i * 7 + size_t(k)) % left.size()];
      const BlockPlan& b = right[(i * 11 + 3) % right.size()];
      std::vector<LayerPlan> member(2, ref), representative(2, ref);
      auto set = [](std::vector<LayerPlan>& ls, int pos, const BlockPlan& x) {
        (pos % 2 == 0 ? ls[size_t(pos / 2)].attn : ls[size_t(pos / 2)].mlp) = x;
      };
      set(member, k, a), set(member, k + 1, b);
      set(representative, k, policy_free(a)), set(representative, k + 1, policy_free(b));
      auto block = [](int pos) { return std::make_pair(pos / 2, pos % 2 == 0 ? Block::Attn : Block::Mlp); };
      ProbeVariants variants(build_schedule(m, plan_from_blocks(m, representative, "probe")), {block(k), block(k + 1)});
      SCOPED_TRACE(layer_label(member[0]) + " / " + layer_label(member[1]));
      const Schedule expected = build_schedule(m, plan_from_blocks(m, member, "probe"));
      // The member's policy deps added to a simulation program of the built schedule (the tuner's way):
      // every op waits as in the member's own schedule.
      SimProgram added(variants.built());
      variants.for_each_policy_dep(member, [&](int32_t op, int32_t dep) { added.add_dep(op, dep); });
      const SimProgram direct(expected);
      ASSERT_EQ(added.size(), direct.size());
      EXPECT_TRUE(std::equal(added.waits(), added.waits() + added.size(), direct.waits()));
      expect_same_schedule(variants.with_layers(member), expected);
      // Patched again from the same build: no deps left over from the previous member.
      expect_same_schedule(variants.with_layers(representative),
                           build_schedule(m, plan_from_blocks(m, representative, "probe")));
      ++compared;
    }
  }
  EXPECT_EQ(compared, 72);
}

TEST(ProbeVariants, TheRepresentativeHasNoPolicyOfItsOwn) {
  const BlockPlan b{SplitDim::Sequence, 4, 2, OverlapMode::None, false, SliceOrder::DeepSpeed};
  const BlockPlan r = policy_free(b);
  EXPECT_EQ(r.overlap, OverlapMode::Intra);
  EXPECT_TRUE(r.bwd_overlap);
  EXPECT_EQ(std::tie(r.dim, r.p, r.q, r.order), std::tie(b.dim, b.p, b.q, b.order));
  const BlockPlan inter{SplitDim::Batch, 2, 1, OverlapMode::Inter, false, SliceOrder::Deep};
  EXPECT_EQ(policy_free(inter).overlap, OverlapMode::Inter);  // inter-block overlap moves ops: kept
}

// The full search's terms from one build per class equal, bit for bit, those from one build per probe: on
// a CPU profile (flat interference) and a GPU one (SM and HBM sharing), both slice orders; a one-layer
// model, whose probe's only MLP is also the last (the head's backward AllReduce follows it).
TEST(ProbeVariants, ClassProbesGiveTheTermsOfSeparateProbes) {
  for (const auto& [model, profile, tp, layers] :
       {std::make_tuple("cpu-gpt", "cpu-dev", 2, 3), std::make_tuple("gpt3-13b", "dgx-h100", 8, 3),
        std::make_tuple("cpu-llama", "cpu-dev", 2, 1)}) {
    const ModelSpec m = shipped_model(model, layers, tp);
    const CostModel cost = shipped_cost(profile);
    const SearchSpace space = make_search_space(
        m, search_options({kBatch, kSeq}, {1, 2, 4}, {1, 2}, {kNone, kIntra, kInter}, {false, true}, {kDeep, kDeepSpeed}));
    SegmentCosts separate(m, cost, space, 0, 0), classes(m, cost, space, 0, 0);
    classes.set_batched(true);
    long pairs = 0;
    const int blocks = 2 * separate.probe_layers();
    for (int k = 0; k < blocks; ++k) {
      const int n = int((k % 2 == 0 ? space.attn : space.mlp).size());
      for (int a = 0; a < n; ++a) EXPECT_EQ(classes.unary(k, a), separate.unary(k, a)) << model << " k " << k << " " << a;
    }
    for (int k = 0; k < std::min(blocks - 1, 2); ++k) {
      const int n = int((k % 2 == 0 ? space.attn : space.mlp).size()), m2 = int((k % 2 == 0 ? space.mlp : space.attn).size());
      for (int a = 0; a < n; ++a) {
        for (int b = 0; b < m2; ++b) {
          EXPECT_EQ(classes.pair(k, a, b), separate.pair(k, a, b)) << model << " k " << k << " " << a << " " << b;
          ++pairs;
        }
      }
    }
    // Every probe once, whichever way: the count the full search reports.
    EXPECT_EQ(classes.simulations(), separate.simulations()) << model;
    EXPECT_EQ(classes.simulations(), classes.full_table_simulations()) << model;
    EXPECT_GT(pairs, 250) << model;
  }
}

// The probes are built without buffer names (BuildOptions::buffer_names = false): the same schedule but for
// the names, hence the same figures, bit for bit; with sliced blocks (partial-sum buffers) and post norms
// (their saved partial sums), on a GPU profile.
TEST(ProbeVariants, UnnamedBuffersChangeOnlyTheNames) {
  BuildOptions unnamed;
  unnamed.buffer_names = false;
  const CostModel cost = shipped_cost("dgx-h100");
  for (const NormPlacement norms : {NormPlacement::Pre, NormPlacement::Post}) {
    ModelSpec m = shipped_model("cpu-llama", 2, 2);
    m.norm_placement = norms;
    validate_model(m);
    const BlockPlan sliced{SplitDim::Sequence, 2, 1, OverlapMode::Inter, true, SliceOrder::Deep};
    const BlockPlan whole{SplitDim::Batch, 1, 1, OverlapMode::None, false, SliceOrder::Deep};
    const Plan plan = plan_from_blocks(m, {LayerPlan{sliced, whole}, LayerPlan{whole, sliced}}, "probe");
    const Schedule named = build_schedule(m, plan), bare = build_schedule(m, plan, unnamed);
    ASSERT_EQ(bare.buffers.size(), named.buffers.size());
    for (size_t i = 0; i < named.buffers.size(); ++i) {
      const BufferDesc &x = bare.buffers[i], &y = named.buffers[i];
      EXPECT_TRUE(x.name.empty()) << y.name;
      EXPECT_FALSE(y.name.empty());
      EXPECT_EQ(std::tie(x.role, x.param, x.layer, x.batch, x.seq, x.cols),
                std::tie(y.role, y.param, y.layer, y.batch, y.seq, y.cols))
          << y.name;
    }
    ASSERT_EQ(bare.ops.size(), named.ops.size());
    for (size_t i = 0; i < named.ops.size(); ++i) expect_same_op(bare.ops[i], named.ops[i]);
    const SimFigures a = simulate_schedule(bare, cost), b = simulate_schedule(named, cost);
    EXPECT_EQ(std::tie(a.iteration_us, a.compute_us, a.comm_us, a.exposed_comm_us, a.peak_memory_bytes),
              std::tie(b.iteration_us, b.compute_us, b.comm_us, b.exposed_comm_us, b.peak_memory_bytes));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, ProbeVariantsMatchTheBuilder,
    ::testing::Values(
        VariantCase{"gpt_pre_norm", "cpu-gpt", NormPlacement::Pre, Residual::Sequential, {kDeep, kDeepSpeed}},
        VariantCase{"llama_pre_norm", "cpu-llama", NormPlacement::Pre, Residual::Sequential, {kDeep, kDeepSpeed}},
        VariantCase{"llama_post_norm", "cpu-llama", NormPlacement::Post, Residual::Sequential, {kDeep}},
        VariantCase{"llama_sandwich_norm", "cpu-llama", NormPlacement::Sandwich, Residual::Sequential,
                    {kDeep, kDeepSpeed}},
        VariantCase{"gpt_parallel", "cpu-gpt", NormPlacement::Pre, Residual::Parallel, {kDeep}}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace domino
