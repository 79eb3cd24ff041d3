// schedule_sp_test.cpp: sequence parallelism in the schedule builder. Structure (each AllReduce of a block
// becomes a ReduceScatter and an AllGather of the same message; the regions between the tensor-parallel
// GEMMs hold S/tp rows; the norm gradients are all-reduced before the optimizer), memory, the verifier on
// every sliced SP plan of the tiny models, the group layout of sequence slices, Domino's overlap under SP,
// and the refusals.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tests/sim/schedule_index.hpp"
#include "tests/sim/schedule_test_util.hpp"

namespace domino {
namespace {

using Indexed = test::IndexedSchedule;
using S = SplitDim;
using O = OverlapMode;

Plan sp_plan(const ModelSpec& m, const BlockPlan& attn, const BlockPlan& mlp) {
  Plan p = make_uniform_plan(m, attn, mlp, "custom");
  p.sequence_parallel = true;
  return p;
}

ModelSpec tied_gpt() {
  ModelSpec m = test::tiny_gpt();
  m.name = "tiny-gpt-tied";
  m.tied_embeddings = true;
  return m;
}

std::vector<ModelSpec> sp_models() {
  return {test::tiny_gpt(), tied_gpt(), test::tiny_llama(), test::tiny_llama(4)};
}

struct Totals {
  int count = 0;
  double bytes = 0;
};

// Count and bytes of the ops of `code` in `phase`, leaving out the loss's AllReduces (not SP's business).
Totals totals(const Schedule& s, OpCode code, Phase phase) {
  Totals t;
  for (const Op& op : s.ops) {
    if (op.code != code || op.phase != phase) continue;
    if (op.block == Block::Head && op.phase == Phase::Forward && op.code == OpCode::AllReduce) continue;
    ++t.count, t.bytes += op.bytes;
  }
  return t;
}

std::string message_of(const ModelSpec& m, const Plan& p) {
  try {
    build_schedule(m, p);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(SequenceParallel, EachAllReduceBecomesAReduceScatterAndAnAllGatherOfTheSameBytes) {
  for (const ModelSpec& m : sp_models()) {
    SCOPED_TRACE(m.name + " tp " + std::to_string(m.tp));
    const Schedule ar = test::build_verified(m, make_strategy_plan("megatron-async", m));
    const Schedule sp = test::build_verified(m, make_strategy_plan("megatron-sp", m));
    const Totals fwd_ar = totals(ar, OpCode::AllReduce, Phase::Forward);
    const Totals bwd_ar = totals(ar, OpCode::AllReduce, Phase::Backward);
    // Forward: the embedding's and every block's AllReduce -> a ReduceScatter; each block's column GEMM and
    // the head read gathered rows (as many gathers, the same full messages).
    for (OpCode code : {OpCode::ReduceScatter, OpCode::AllGather}) {
      const Totals t = totals(sp, code, Phase::Forward);
      EXPECT_EQ(t.count, fwd_ar.count);
      EXPECT_DOUBLE_EQ(t.bytes, fwd_ar.bytes);
    }
    // Backward: every input-gradient AllReduce (the head's too) -> a ReduceScatter; the residual gradient is
    // gathered once per block and for the embedding, the norm output gathered again for the weight gradient.
    const Totals rs = totals(sp, OpCode::ReduceScatter, Phase::Backward);
    EXPECT_EQ(rs.count, bwd_ar.count);
    EXPECT_DOUBLE_EQ(rs.bytes, bwd_ar.bytes);
    EXPECT_EQ(totals(sp, OpCode::AllGather, Phase::Backward).count, 2 * (2 * m.layers) + 1);
    // Nothing but the norm gradients is all-reduced in the backward.
    const int norm_params = m.norm == NormKind::LayerNorm ? 2 : 1;
    EXPECT_EQ(totals(sp, OpCode::AllReduce, Phase::Backward).count, norm_params * (2 * m.layers + 1));
  }
}

TEST(SequenceParallel, RegionsBetweenTheGemmsHoldSeqOverTpRows) {
  for (const ModelSpec& m : sp_models()) {
    SCOPED_TRACE(m.name + " tp " + std::to_string(m.tp));
    const Schedule ar = test::build_verified(m, make_strategy_plan("megatron-async", m));
    const Schedule sp = test::build_verified(m, make_strategy_plan("megatron-sp", m));
    std::map<std::string, int64_t> full_seq;
    for (const BufferDesc& b : ar.buffers) full_seq[b.name] = b.seq;
    int sharded = 0;
    for (const BufferDesc& b : sp.buffers) {
      const bool residual = b.name == "x0" || b.name.ends_with(".x_mid") || b.name.ends_with(".x_out");
      const bool norm = b.name.ends_with("norm.y") || b.name.ends_with("norm.stats");
      const bool grads =
          b.name == "grad.resid" || b.name == "grad.head.norm.y" || b.name.rfind("sp.ps.", 0) == 0;
      if (!residual && !norm && !grads) {
        // Every other buffer is the non-SP one (the two gathered workspaces are new, full rows).
        if (b.name.rfind("sp.", 0) == 0)
          EXPECT_EQ(b.seq, m.seq_len) << b.name;
        else
          EXPECT_EQ(full_seq.at(b.name), b.seq) << b.name;
        continue;
      }
      ++sharded;
      EXPECT_EQ(b.seq, m.seq_len / m.tp) << b.name;
      if (full_seq.count(b.name)) {
        EXPECT_EQ(full_seq.at(b.name), m.seq_len) << b.name;
      }
    }
    // x0, x_mid/x_out and two norms (y, stats) per layer, the final norm, two gradients, two reduced ones.
    EXPECT_EQ(sharded, 1 + 6 * m.layers + 2 + 2 + 4);
    EXPECT_LT(schedule_memory_bytes(sp), schedule_memory_bytes(ar));
  }
}

TEST(SequenceParallel, CollectivesWaitAndAreWaitedForByTheirNeighbours) {
  const ModelSpec m = test::tiny_gpt();
  const Indexed x(test::build_verified(m, make_strategy_plan("megatron-sp", m)));
  EXPECT_TRUE(x.waits("L1.fwd.attn.ag.s0", "L1.fwd.attn.norm.s0"));
  EXPECT_TRUE(x.waits("L1.fwd.attn.qkv.s0", "L1.fwd.attn.ag.s0"));
  EXPECT_TRUE(x.waits("L1.fwd.attn.rs.s0", "L1.fwd.attn.proj.s0"));
  EXPECT_TRUE(x.waits("L1.fwd.attn.add.s0", "L1.fwd.attn.rs.s0"));
  EXPECT_TRUE(x.waits("head.fwd.logits", "head.fwd.norm.ag"));
  EXPECT_TRUE(x.waits("emb.fwd.pos", "emb.fwd.rs"));
  EXPECT_EQ(x.op("emb.fwd.pos").attrs.sp_groups, 1);
  EXPECT_TRUE(x.waits("L1.bwd.mlp.fc2.dgrad.s0", "L1.bwd.mlp.dy.ag.s0"));
  EXPECT_TRUE(x.waits("L1.bwd.mlp.fc1.wgrad.s0", "L1.bwd.mlp.x.ag.s0"));
  EXPECT_TRUE(x.waits("L1.bwd.mlp.norm.bwd.s0", "L1.bwd.mlp.rs.s0"));
  EXPECT_TRUE(x.waits("emb.bwd", "emb.bwd.dy.ag"));
  // megatron-sp: the input gradient's ReduceScatter runs behind the weight gradient (Megatron's order), and
  // nothing else overlaps it.
  EXPECT_FALSE(x.waits("L1.bwd.mlp.fc1.wgrad.s0", "L1.bwd.mlp.rs.s0"));
  EXPECT_LT(x.pos("L1.bwd.mlp.rs.s0"), x.pos("L1.bwd.mlp.fc1.wgrad.s0"));
  // megatron-sp-sync: that ReduceScatter blocks the weight gradient as well.
  const Indexed blocking(test::build_verified(m, make_strategy_plan("megatron-sp-sync", m)));
  EXPECT_TRUE(blocking.waits("L1.bwd.mlp.fc1.wgrad.s0", "L1.bwd.mlp.rs.s0"));
  EXPECT_TRUE(blocking.waits("L1.bwd.attn.qkv.wgrad.s0", "L1.bwd.attn.rs.s0"));
}

// Every writer of a norm gradient comes before its AllReduce, and the optimizer step after it.
TEST(SequenceParallel, NormGradientsAreAllReducedAfterTheirLastWriterBeforeTheOptimizer) {
  for (const ModelSpec& m : sp_models()) {
    for (const Plan& plan :
         {make_strategy_plan("megatron-sp", m),
          sp_plan(m, {S::Batch, 2, 2, O::Inter, true}, {S::Sequence, 2, 1, O::Inter, true})}) {
      SCOPED_TRACE(m.name);
      const Schedule s = test::build_verified(m, plan);
      int reduced = 0;
      for (const Op& ar : s.ops) {
        if (ar.code != OpCode::AllReduce || ar.phase != Phase::Backward) continue;
        const int32_t grad = ar.out[0].buffer;
        ASSERT_EQ(s.buffers[size_t(grad)].role, BufferRole::Grad) << op_id(ar);
        ++reduced;
        for (const Op& op : s.ops) {
          for (int j = 0; j < op.n_out; ++j) {
            if (op.out[size_t(j)].buffer == grad && op.index != ar.index) {
              EXPECT_LT(op.index, ar.index) << op_id(op);
            }
          }
          if (op.kind == OpKind::Optimizer && op.in[0].buffer == grad) {
            EXPECT_GT(op.index, ar.index);
          }
        }
      }
      EXPECT_EQ(reduced, (m.norm == NormKind::LayerNorm ? 2 : 1) * (2 * m.layers + 1));
    }
  }
}

// Sequence slices: one group per slice of the largest count; every collective of a slice covers its groups.
TEST(SequenceParallel, SequenceSlicesUseTheGroupLayout) {
  const ModelSpec m = test::tiny_llama();
  const Plan plan = sp_plan(m, {S::Sequence, 4, 1, O::Inter, true}, {S::Sequence, 2, 2, O::Intra, true});
  EXPECT_EQ(sp_group_count(plan), 4);
  const Indexed x(test::build_verified(m, plan));
  const int64_t part = m.seq_len / (4 * m.tp);
  const Op& ag = x.op("L0.fwd.attn.ag.s2");
  EXPECT_EQ(ag.attrs.chunks, 1);
  EXPECT_EQ(ag.in[0].s0, 2 * part);
  EXPECT_EQ(ag.in[0].s1, 3 * part);
  EXPECT_EQ(ag.out[0].s0, 2 * m.seq_len / 4);
  EXPECT_EQ(ag.out[0].s1, 3 * m.seq_len / 4);
  const Op& rs = x.op("L0.fwd.mlp.rs.s1.c1");
  EXPECT_EQ(rs.attrs.chunks, 2);
  EXPECT_EQ(rs.out[0].s0, 2 * part);
  EXPECT_EQ(rs.out[0].c0, m.hidden / 2);
  // Llama has rotary positions: no PositionAdd; GPT's carries the group count.
  const ModelSpec gpt = test::tiny_gpt();
  const Indexed y(test::build_verified(
      gpt, sp_plan(gpt, {S::Sequence, 2, 1, O::Inter, true}, {S::Batch, 2, 1, O::Inter, true})));
  EXPECT_EQ(y.op("emb.fwd.pos").attrs.sp_groups, 2);
}

// Domino under SP: slice i's ReduceScatter runs behind slice i+1's compute (no gather it needs queues behind
// it), and with inter the last one behind the next block's first slice; the same in the backward.
TEST(SequenceParallel, BatchSlicesOverlapTheirCollectivesWithTheOtherSlicesCompute) {
  for (const ModelSpec& m : sp_models()) {
    SCOPED_TRACE(m.name);
    const BlockPlan b{S::Batch, 2, 1, O::Inter, true};
    const Indexed x(test::build_verified(m, sp_plan(m, b, b)));
    EXPECT_FALSE(x.reaches("L1.fwd.attn.rs.s0", "L1.fwd.attn.qkv.s1"));
    EXPECT_FALSE(x.reaches("L1.fwd.attn.rs.s0", "L1.fwd.attn.proj.s1"));
    EXPECT_TRUE(x.reaches("L1.fwd.attn.rs.s0", "L1.fwd.attn.add.s0"));
    EXPECT_FALSE(x.reaches("L1.fwd.attn.rs.s1", "L1.fwd.mlp.fc1.s0"));
    EXPECT_FALSE(x.reaches("L0.fwd.mlp.rs.s1", "L1.fwd.attn.qkv.s0"));
    EXPECT_FALSE(x.reaches("L1.bwd.mlp.rs.s1", "L1.bwd.mlp.fc2.dgrad.s0"));
    EXPECT_FALSE(x.reaches("L1.bwd.mlp.rs.s0", "L1.bwd.attn.proj.dgrad.s1"));
    EXPECT_TRUE(x.reaches("L1.bwd.mlp.rs.s0", "L1.bwd.mlp.norm.bwd.s0"));
    // megatron-sp has none of it: each ReduceScatter blocks.
    const Indexed sync(test::build_verified(m, make_strategy_plan("megatron-sp", m)));
    EXPECT_TRUE(sync.reaches("L1.fwd.attn.rs.s0", "L1.fwd.mlp.fc1.s0"));
  }
}

// megatron-sp-overlap: each GEMM chunk waits only for its own chunk's gather, each chunk's ReduceScatter runs
// behind the next chunk's GEMM; the messages add up to megatron-sp's.
TEST(SequenceParallel, PipelinedChunksOverlapTheGemms) {
  for (const ModelSpec& m : {test::tiny_gpt(), tied_gpt(), test::tiny_llama()}) {
    SCOPED_TRACE(m.name);
    const Schedule plain = test::build_verified(m, make_strategy_plan("megatron-sp", m));
    const Indexed x(test::build_verified(m, make_strategy_plan("megatron-sp-overlap", m)));
    for (OpCode code : {OpCode::AllGather, OpCode::ReduceScatter}) {
      for (Phase phase : {Phase::Forward, Phase::Backward})
        EXPECT_DOUBLE_EQ(totals(x.s, code, phase).bytes, totals(plain, code, phase).bytes);
    }
    EXPECT_EQ(x.op("L1.fwd.attn.ag.s0.c2").attrs.chunks, 1);
    EXPECT_EQ(x.op("emb.fwd.rs").attrs.chunks, 4);
    for (const char* block : {"attn", "mlp"}) {
      const std::string f = std::string("L1.fwd.") + block + ".", b = std::string("L1.bwd.") + block + ".";
      const std::string col = block == std::string("attn") ? "qkv" : "fc1",
                        row = block == std::string("attn") ? "proj" : "fc2";
      EXPECT_TRUE(x.waits(f + col + ".s0.c1", f + "ag.s0.c1"));
      EXPECT_FALSE(x.reaches(f + "ag.s0.c2", f + col + ".s0.c1"));
      EXPECT_FALSE(x.reaches(f + "rs.s0.c0", f + row + ".s0.c3"));
      EXPECT_TRUE(x.reaches(f + "rs.s0.c3", f + "add.s0"));
      EXPECT_FALSE(x.reaches(b + "dy.ag.s0.c2", b + row + ".dgrad.s0.c1"));
      EXPECT_TRUE(x.waits(b + row + ".dgrad.s0.c2", b + "dy.ag.s0.c2"));
    }
  }
}

// Every sliced plan of the shared list under SP (sp_plans_for: deep order; the deepspeed order is refused):
// the verifier accepts it and it runs the same compute ops as without SP.
TEST(SequenceParallel, VerifierAcceptsEverySlicedPlan) {
  for (const ModelSpec& m : sp_models()) {
    const std::vector<test::NamedPlan> plans = test::sp_plans_for(m);
    EXPECT_GE(plans.size(), 8u) << m.name;
    for (const test::NamedPlan& np : plans) {
      SCOPED_TRACE(m.name + " tp " + std::to_string(m.tp) + " / " + np.name);
      Plan without = np.plan;
      without.sequence_parallel = false;
      const Schedule plain = test::build_verified(m, without), sp = test::build_verified(m, np.plan);
      std::map<OpKind, int> a, b;
      for (const Op& op : plain.ops) ++a[op.kind];
      for (const Op& op : sp.ops) ++b[op.kind];
      for (OpKind k : {OpKind::Gemm, OpKind::Attention, OpKind::Norm, OpKind::Elementwise, OpKind::Optimizer})
        EXPECT_EQ(a[k], b[k]) << to_string(k);
      EXPECT_GT(b[OpKind::AllGather], 0);
      EXPECT_LT(schedule_memory_bytes(sp), schedule_memory_bytes(plain));
    }
  }
  Plan ds = make_strategy_plan("domino-ds", test::tiny_gpt());
  ds.sequence_parallel = true;
  EXPECT_NE(message_of(test::tiny_gpt(), ds).find("deepspeed slice order"), std::string::npos);
}

// The verifier's contract for the two collectives and PositionAdd on sharded rows, on broken copies of a
// built schedule.
TEST(SequenceParallel, VerifierCatchesBrokenCollectives) {
  const ModelSpec m = test::tiny_gpt();
  const Indexed x(test::build_verified(m, make_strategy_plan("megatron-sp", m)));
  const auto problem_after = [&](const std::string& id, const std::function<void(Op&)>& edit) {
    Schedule s = x.s;
    Op& op = s.ops[size_t(x.pos(id))];
    edit(op);
    return op_contract_problem(s, op);
  };
  EXPECT_EQ(problem_after("L1.fwd.attn.ag.s0", [](Op&) {}), "");
  EXPECT_NE(problem_after("L1.fwd.attn.ag.s0", [](Op& op) { op.attrs.chunks = 3; }), "");
  EXPECT_NE(problem_after("L1.fwd.attn.ag.s0", [](Op& op) { op.stream = Stream::Compute; }), "");
  EXPECT_NE(problem_after("L1.fwd.attn.ag.s0", [](Op& op) { op.in[0].s1 -= 1; }), "");  // not tp parts
  EXPECT_NE(problem_after("L1.fwd.attn.ag.s0", [](Op& op) { op.out[0].b1 -= 1; }), "");
  EXPECT_NE(problem_after("L1.fwd.mlp.rs.s0", [](Op& op) { op.attrs.reduce = ReduceOp::Max; }), "");
  EXPECT_NE(problem_after("L1.fwd.mlp.rs.s0", [](Op& op) { op.out[0].c1 -= 1; }), "");
  EXPECT_EQ(problem_after("emb.fwd.pos", [](Op&) {}), "");
  EXPECT_NE(problem_after("emb.fwd.pos", [](Op& op) { op.attrs.sp_groups = 3; }),
            "");  // 3 x tp 2 does not divide 8
}

TEST(SequenceParallel, RefusesWhatItDoesNotBuildByName) {
  const BlockPlan one{};
  EXPECT_NE(message_of(test::tiny_gpt(1), sp_plan(test::tiny_gpt(1), one, one)).find("needs tp >= 2"),
            std::string::npos);
  ModelSpec parallel = test::tiny_gpt();
  parallel.residual = Residual::Parallel;
  EXPECT_NE(message_of(parallel, sp_plan(parallel, one, one)).find("parallel attention/MLP"),
            std::string::npos);
  ModelSpec post = test::tiny_llama();
  post.norm_placement = NormPlacement::Sandwich;
  EXPECT_NE(message_of(post, sp_plan(post, one, one)).find("sandwich-norm"), std::string::npos);
  ModelSpec odd = test::tiny_gpt();
  odd.seq_len = 12;  // 4 groups x tp 2 do not divide it
  EXPECT_NE(message_of(odd, sp_plan(odd, {S::Sequence, 4, 1, O::Inter, true}, one)).find("seq_len 12"),
            std::string::npos);
  EXPECT_NE(make_strategy_plan("megatron-sp", test::tiny_gpt()).sequence_parallel, false);
}

}  // namespace
}  // namespace domino
