// schedule_order_test.cpp: the two slice orders (BlockPlan::order). domino-ds reproduces the twelve forward
// steps of DeepSpeed's released Domino layer and, in backward, their reverse with DeepSpeed's rule for the
// column-parallel linears; domino-deep keeps the project's deeper pipeline; domino-ds refuses the models
// DeepSpeed's Domino does not support, naming each missing feature.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include <string>
#include <vector>

#include "sim/base/error.hpp"
#include "tests/sim/schedule_index.hpp"
#include "tests/sim/schedule_test_util.hpp"

namespace domino {
namespace {

using test::Ids;
using Indexed = test::IndexedSchedule;

void expect_overlap(const Indexed& x, const std::string& ar, const Ids& behind, const std::string& waiter) {
  std::string got;
  EXPECT_EQ(x.overlapped(ar, &got), behind) << ar;
  EXPECT_EQ(got, waiter) << ar;
}

// A middle layer (1 of 3) of a GPT model: DeepSpeed's steps 1-12, framed by layer 0's steps 11-12 and
// layer 2's steps 1-2 (the inter-layer crossing).
TEST(SliceOrder, DominoDsForwardIsDeepSpeedsTwelveSteps) {
  const ModelSpec m = test::tiny_gpt();
  const Indexed x(test::build_verified(m, make_strategy_plan("domino-ds", m)));
  const Ids expected = {
      "L0.fwd.mlp.add.s0",   "L1.fwd.attn.norm.s0",  // layer 0 step 11: add, then layer 1's input norm
      "L0.fwd.mlp.fc2.s1",                           // layer 0 step 12
      "L1.fwd.attn.qkv.s0",  "L1.fwd.attn.core.s0",  // 1
      "L0.fwd.mlp.add.s1",   "L1.fwd.attn.norm.s1",  // 2
      "L1.fwd.attn.proj.s0",                         // 3
      "L1.fwd.attn.qkv.s1",  "L1.fwd.attn.core.s1",  // 4
      "L1.fwd.attn.add.s0",  "L1.fwd.mlp.norm.s0",   // 5
      "L1.fwd.attn.proj.s1",                         // 6
      "L1.fwd.mlp.fc1.s0",   "L1.fwd.mlp.act.s0",    // 7
      "L1.fwd.attn.add.s1",  "L1.fwd.mlp.norm.s1",   // 8
      "L1.fwd.mlp.fc2.s0",                           // 9
      "L1.fwd.mlp.fc1.s1",   "L1.fwd.mlp.act.s1",    // 10
      "L1.fwd.mlp.add.s0",   "L2.fwd.attn.norm.s0",  // 11
      "L1.fwd.mlp.fc2.s1",                           // 12
      "L2.fwd.attn.qkv.s0",  "L2.fwd.attn.core.s0",  // layer 2 step 1
      "L1.fwd.mlp.add.s1",   "L2.fwd.attn.norm.s1",  // layer 2 step 2
  };
  EXPECT_EQ(x.compute_from("L0.fwd.mlp.add.s0", expected.size()), expected);
  // Each AllReduce is launched right after its GEMM and hides behind the other slice's front only.
  for (const char* ar : {"L1.fwd.attn.ar.s0", "L1.fwd.attn.ar.s1", "L1.fwd.mlp.ar.s0", "L1.fwd.mlp.ar.s1"}) {
    const Op& launch = x.s.ops[size_t(x.pos(ar)) - 1];
    EXPECT_EQ(launch.code, OpCode::MatMul) << ar;
    EXPECT_EQ(launch.slice, x.s.ops[size_t(x.pos(ar))].slice) << ar;
  }
  expect_overlap(x, "L1.fwd.attn.ar.s0", {"L1.fwd.attn.qkv.s1", "L1.fwd.attn.core.s1"}, "L1.fwd.attn.add.s0");
  expect_overlap(x, "L1.fwd.attn.ar.s1", {"L1.fwd.mlp.fc1.s0", "L1.fwd.mlp.act.s0"}, "L1.fwd.attn.add.s1");
  expect_overlap(x, "L1.fwd.mlp.ar.s0", {"L1.fwd.mlp.fc1.s1", "L1.fwd.mlp.act.s1"}, "L1.fwd.mlp.add.s0");
  expect_overlap(x, "L1.fwd.mlp.ar.s1", {"L2.fwd.attn.qkv.s0", "L2.fwd.attn.core.s0"}, "L1.fwd.mlp.add.s1");
}

// Layer 0 has no add before it: slice 0's norm comes before step 1, slice 1's at step 2.
TEST(SliceOrder, DominoDsFirstLayerNorms) {
  const ModelSpec m = test::tiny_gpt();
  const Indexed x(test::build_verified(m, make_strategy_plan("domino-ds", m)));
  // The embedding's last compute op adds the positions once its vocabulary-shard AllReduce is done.
  const Ids expected = {"emb.fwd.pos",         "L0.fwd.attn.norm.s0", "L0.fwd.attn.qkv.s0", "L0.fwd.attn.core.s0",
                        "L0.fwd.attn.norm.s1", "L0.fwd.attn.proj.s0", "L0.fwd.attn.qkv.s1", "L0.fwd.attn.core.s1",
                        "L0.fwd.attn.add.s0",  "L0.fwd.mlp.norm.s0"};
  EXPECT_EQ(x.compute_from("emb.fwd.pos", expected.size()), expected);
  // Nothing crosses into the head: the last add and nothing else between the last GEMM and the head.
  EXPECT_EQ(x.compute_from("L2.fwd.mlp.fc2.s1", 3), (Ids{"L2.fwd.mlp.fc2.s1", "L2.fwd.mlp.add.s1", "head.fwd.norm"}));
}

// Backward: the reverse of the forward's program order; each column-parallel linear runs dgrad, launches
// its AllReduce, runs wgrad (which does not wait), and the norm backward of that slice is the first op that
// waits for the AllReduce.
TEST(SliceOrder, DominoDsBackwardReversesTheForward) {
  const ModelSpec m = test::tiny_gpt();
  const Indexed x(test::build_verified(m, make_strategy_plan("domino-ds", m)));
  const Ids expected = {
      "L1.bwd.mlp.fc2.dgrad.s1",   "L1.bwd.mlp.fc2.wgrad.s1",   // step 12 reversed
      "L2.bwd.attn.norm.bwd.s0",                                // 11
      "L1.bwd.mlp.act.bwd.s1",     "L1.bwd.mlp.fc1.dgrad.s1",  "L1.bwd.mlp.fc1.wgrad.s1",  // 10
      "L1.bwd.mlp.fc2.dgrad.s0",   "L1.bwd.mlp.fc2.wgrad.s0",   // 9
      "L1.bwd.mlp.norm.bwd.s1",                                 // 8
      "L1.bwd.mlp.act.bwd.s0",     "L1.bwd.mlp.fc1.dgrad.s0",  "L1.bwd.mlp.fc1.wgrad.s0",  // 7
      "L1.bwd.attn.proj.dgrad.s1", "L1.bwd.attn.proj.wgrad.s1",  // 6
      "L1.bwd.mlp.norm.bwd.s0",                                 // 5
      "L1.bwd.attn.core.bwd.s1",   "L1.bwd.attn.qkv.dgrad.s1", "L1.bwd.attn.qkv.wgrad.s1",  // 4
      "L1.bwd.attn.proj.dgrad.s0", "L1.bwd.attn.proj.wgrad.s0",  // 3
      "L1.bwd.attn.norm.bwd.s1",                                // 2
      "L1.bwd.attn.core.bwd.s0",   "L1.bwd.attn.qkv.dgrad.s0", "L1.bwd.attn.qkv.wgrad.s0",  // 1
      "L0.bwd.mlp.fc2.dgrad.s1",   "L0.bwd.mlp.fc2.wgrad.s1",   // layer 0 step 12
      "L1.bwd.attn.norm.bwd.s0",                                // layer 0 step 11
  };
  EXPECT_EQ(x.compute_from("L1.bwd.mlp.fc2.dgrad.s1", expected.size()), expected);
  for (const char* lin : {"L1.bwd.mlp.fc1", "L1.bwd.attn.qkv"}) {
    for (const char* slice : {".s0", ".s1"}) {
      const std::string dgrad = std::string(lin) + ".dgrad" + slice, wgrad = std::string(lin) + ".wgrad" + slice;
      const std::string block = std::string(lin).substr(0, std::string(lin).rfind('.'));
      const std::string ar = block + ".ar" + slice;
      EXPECT_EQ(x.pos(ar), x.pos(dgrad) + 1) << ar << " launches right after " << dgrad;
      EXPECT_EQ(x.pos(wgrad), x.pos(ar) + 1) << wgrad;
      EXPECT_FALSE(x.waits(wgrad, ar)) << wgrad << " runs behind " << ar;
      std::string waiter;
      x.overlapped(ar, &waiter);
      EXPECT_EQ(waiter, block + ".norm.bwd" + slice) << ar;
    }
  }
  expect_overlap(x, "L1.bwd.mlp.ar.s1",
                 {"L1.bwd.mlp.fc1.wgrad.s1", "L1.bwd.mlp.fc2.dgrad.s0", "L1.bwd.mlp.fc2.wgrad.s0"},
                 "L1.bwd.mlp.norm.bwd.s1");
  expect_overlap(x, "L1.bwd.attn.ar.s0",
                 {"L1.bwd.attn.qkv.wgrad.s0", "L0.bwd.mlp.fc2.dgrad.s1", "L0.bwd.mlp.fc2.wgrad.s1"},
                 "L1.bwd.attn.norm.bwd.s0");
}

// domino-deep: the same slicing in the project's order, slice i's AllReduce behind slice i+1's whole
// compute (norm, front and back) and, across blocks, the previous block's held-back add.
TEST(SliceOrder, DominoDeepKeepsTheDeeperPipeline) {
  const ModelSpec m = test::tiny_gpt();
  const Plan plan = make_strategy_plan("domino-deep", m);
  EXPECT_EQ(plan.layers[1].attn, (BlockPlan{SplitDim::Batch, 2, 1, OverlapMode::Inter, true, SliceOrder::Deep}));
  const Indexed x(test::build_verified(m, plan));
  const Ids expected = {
      "L1.fwd.attn.norm.s0", "L1.fwd.attn.qkv.s0", "L1.fwd.attn.core.s0", "L1.fwd.attn.proj.s0",
      "L0.fwd.mlp.add.s1",   "L1.fwd.attn.norm.s1", "L1.fwd.attn.qkv.s1", "L1.fwd.attn.core.s1",
      "L1.fwd.attn.proj.s1", "L1.fwd.attn.add.s0",  "L1.fwd.mlp.norm.s0", "L1.fwd.mlp.fc1.s0",
      "L1.fwd.mlp.act.s0",   "L1.fwd.mlp.fc2.s0",   "L1.fwd.attn.add.s1", "L1.fwd.mlp.norm.s1",
  };
  EXPECT_EQ(x.compute_from("L1.fwd.attn.norm.s0", expected.size()), expected);
  expect_overlap(x, "L1.fwd.attn.ar.s0",
                 {"L0.fwd.mlp.add.s1", "L1.fwd.attn.norm.s1", "L1.fwd.attn.qkv.s1", "L1.fwd.attn.core.s1",
                  "L1.fwd.attn.proj.s1"},
                 "L1.fwd.attn.add.s0");
  const Ids backward = {"L1.bwd.mlp.fc2.dgrad.s1", "L1.bwd.mlp.fc2.wgrad.s1", "L1.bwd.mlp.act.bwd.s1",
                        "L1.bwd.mlp.fc1.dgrad.s1", "L1.bwd.mlp.fc1.wgrad.s1", "L2.bwd.attn.norm.bwd.s0",
                        "L1.bwd.mlp.fc2.dgrad.s0"};
  EXPECT_EQ(x.compute_from("L1.bwd.mlp.fc2.dgrad.s1", backward.size()), backward);
}

std::string refusal(const std::string& strategy, const ModelSpec& m) {
  try {
    make_strategy_plan(strategy, m);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    return e.what();
  }
  return "<accepted>";
}

TEST(SliceOrder, DominoDsRefusesWhatDeepSpeedDoesNotSupport) {
  const std::string llama = refusal("domino-ds", test::tiny_llama());
  for (const char* feature : {"RMSNorm", "the swiglu activation", "grouped-query attention (kv_heads 2 < heads 4",
                              "rotary embeddings", "'domino-deep'", "tiny-llama"}) {
    EXPECT_NE(llama.find(feature), std::string::npos) << feature << " in: " << llama;
  }
  // Only what the model lacks is named.
  ModelSpec gqa = test::tiny_gpt();
  gqa.kv_heads = 2;
  const std::string one = refusal("domino-ds", gqa);
  EXPECT_NE(one.find("grouped-query attention"), std::string::npos) << one;
  for (const char* absent : {"RMSNorm", "swiglu", "rotary"}) EXPECT_EQ(one.find(absent), std::string::npos) << one;
  // An odd micro-batch: both two-slice strategies refuse, and domino-deep is no way out.
  ModelSpec odd = test::tiny_gpt();
  odd.micro_batch = 3;
  for (const char* name : {"domino-ds", "domino-deep"}) {
    const std::string e = refusal(name, odd);
    EXPECT_NE(e.find("micro_batch 3 (odd)"), std::string::npos) << e;
    EXPECT_EQ(e.find("'domino-deep' runs"), std::string::npos) << e;
  }
  // domino-deep runs every model that splits in two.
  for (const ModelSpec& m : {test::tiny_llama(2), test::tiny_llama(4), test::llama2_70b()}) {
    const Plan p = make_strategy_plan("domino-deep", m);
    EXPECT_EQ(p.layers.front().mlp.order, SliceOrder::Deep);
    if (m.layers < 10) test::build_verified(m, p);
  }
}

// An op's regions, buffers by name: buffers made on first use may be numbered differently.
std::vector<std::string> regions(const Schedule& s, const Op& op) {
  std::vector<std::string> out;
  const auto add = [&](const Region& r) {
    out.push_back(fmt::format("{}[{}:{},{}:{},{}:{}]", s.buffers[size_t(r.buffer)].name, r.b0, r.b1, r.s0, r.s1,
                              r.c0, r.c1));
  };
  for (int i = 0; i < op.n_in; ++i) add(op.in[size_t(i)]);
  out.push_back("->");
  for (int i = 0; i < op.n_out; ++i) add(op.out[size_t(i)]);
  return out;
}

// Every deepspeed-order schedule, on every small model and slicing, computes exactly what the deep one
// does: the same ops (ids, opcodes, regions), only in another program order.
TEST(SliceOrder, SameOpsInAnotherOrder) {
  size_t compared = 0;  // plans that had a deepspeed-order block to compare
  for (const ModelSpec& m : test::small_models()) {
    for (const test::NamedPlan& np : test::plans_for(m)) {
      Plan deep = np.plan;
      bool any = false;
      for (LayerPlan& l : deep.layers) {
        for (BlockPlan* b : {&l.attn, &l.mlp}) {
          any |= b->order == SliceOrder::DeepSpeed;
          b->order = SliceOrder::Deep;
        }
      }
      if (!any) continue;
      ++compared;
      SCOPED_TRACE(m.name + " / " + np.name);
      const Schedule a = test::build_verified(m, np.plan), b = test::build_verified(m, deep);
      ASSERT_EQ(a.ops.size(), b.ops.size());
      const test::IndexedSchedule deep_ops(b);
      size_t moved = 0;
      for (const Op& op : a.ops) {
        ASSERT_TRUE(deep_ops.at.count(op_id(op))) << op_id(op);
        const Op& o = deep_ops.op(op_id(op));
        EXPECT_EQ(op.code, o.code) << op_id(op);
        EXPECT_EQ(regions(a, op), regions(b, o)) << op_id(op);
        EXPECT_EQ(op.attrs.accumulate, o.attrs.accumulate) << op_id(op);
        EXPECT_EQ(op.attrs.accumulate_params, o.attrs.accumulate_params) << op_id(op);
        moved += op.index != o.index;
      }
      EXPECT_GT(moved, 0u);
    }
  }
  EXPECT_GT(compared, 0u);
}

}  // namespace
}  // namespace domino
