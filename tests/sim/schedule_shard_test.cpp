// schedule_shard_test.cpp: shard_of/full_shape: the ranks' local parameter shards tile the full tensors
// exactly as Megatron shards them (sharded tensors covered once, KV heads replicated when tp > kv_heads,
// replicated tensors identical on every rank).
#include <gtest/gtest.h>

#include <map>

#include "sim/base/error.hpp"
#include "tests/sim/schedule_test_util.hpp"

namespace domino {
namespace {

// How often each full-tensor element is held by some rank, per parameter buffer name (without "L<n>.").
void check_tiling(const ModelSpec& m) {
  SCOPED_TRACE(m.name + " tp " + std::to_string(m.tp));
  const Schedule s = test::build_verified(m, make_strategy_plan("megatron-sync", m));
  for (const BufferDesc& b : s.buffers) {
    if (b.role != BufferRole::Param || b.layer > 0) continue;  // layer 0 stands for all layers
    const auto shape = full_shape(m, b);
    std::vector<int> hits(size_t(shape[0] * shape[1]), 0);
    for (int r = 0; r < m.tp; ++r) {
      for (int64_t row = 0; row < b.seq; ++row) {
        for (int64_t col = 0; col < b.cols; ++col) {
          const ParamCoord c = shard_of(m, b, r, row, col);
          ASSERT_TRUE(c.row >= 0 && c.row < shape[0] && c.col >= 0 && c.col < shape[1]) << b.name;
          ++hits[size_t(c.row * shape[1] + c.col)];
        }
      }
    }
    const bool replicated = b.elements() == shape[0] * shape[1];
    for (int64_t i = 0; i < int64_t(hits.size()); ++i) {
      int expected = replicated ? m.tp : 1;
      if (b.param == ParamKind::QkvWeight && m.kv_heads < m.tp) {
        // K and V columns: each KV head is held by tp / kv_heads ranks.
        const int64_t col = i % shape[1];
        if (col >= int64_t(m.heads) * m.head_dim()) expected = m.tp / m.kv_heads;
      }
      ASSERT_EQ(hits[size_t(i)], expected) << b.name << " element " << i;
    }
  }
}

TEST(ParamShard, ShardsTileTheFullTensors) {
  for (const int tp : {1, 2, 4}) {
    check_tiling(test::tiny_gpt(tp));
    check_tiling(test::tiny_llama(tp));
  }
}

TEST(ParamShard, QkvColumnsFollowHeads) {
  const ModelSpec m = test::tiny_llama(4);  // 4 query heads, 2 KV heads, d = 8: one Q head per rank
  const Schedule s = test::build_verified(m, make_strategy_plan("megatron-sync", m));
  const BufferDesc* qkv = nullptr;
  for (const BufferDesc& b : s.buffers) qkv = b.name == "L0.attn.qkv.w" ? &b : qkv;
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->cols, 3 * 8);  // 1 Q head, 1 K head, 1 V head
  const auto shape = full_shape(m, *qkv);
  EXPECT_EQ(shape[0], 32);
  EXPECT_EQ(shape[1], (4 + 2 * 2) * 8);
  // Rank 3: Q head 3 (cols 24..31), KV head 3 / (4/2) = 1: K at 32 + 8, V at 32 + 16 + 8.
  EXPECT_EQ(shard_of(m, *qkv, 3, 5, 0).col, 24);
  EXPECT_EQ(shard_of(m, *qkv, 3, 5, 8).col, 40);
  EXPECT_EQ(shard_of(m, *qkv, 3, 5, 16).col, 56);
  EXPECT_EQ(shard_of(m, *qkv, 3, 5, 16).row, 5);
}

TEST(ParamShard, SwigluKeepsGateAndUpHalves) {
  const ModelSpec m = test::tiny_llama(2);  // ffn 48: 24 per rank
  const Schedule s = test::build_verified(m, make_strategy_plan("megatron-sync", m));
  for (const BufferDesc& b : s.buffers) {
    if (b.name != "L1.mlp.fc1.w") continue;
    EXPECT_EQ(b.cols, 48);
    EXPECT_EQ(shard_of(m, b, 1, 0, 0).col, 24);        // gate of rank 1
    EXPECT_EQ(shard_of(m, b, 1, 0, 24).col, 48 + 24);  // up of rank 1
    EXPECT_EQ(full_shape(m, b)[1], 96);
  }
}

TEST(ParamShard, RejectsNonParameters) {
  const ModelSpec m = test::tiny_gpt();
  const Schedule s = test::build_verified(m, make_strategy_plan("megatron-sync", m));
  for (const BufferDesc& b : s.buffers) {
    if (b.role == BufferRole::Activation) {
      EXPECT_THROW(full_shape(m, b), Error);
      break;
    }
  }
  EXPECT_THROW(shard_of(m, s.buffers[0], m.tp, 0, 0), Error);
}

}  // namespace
}  // namespace domino
