// schedule_vocab_test.cpp: the vocabulary-parallel ends of the model in the IR (Megatron-LM's
// VocabParallelEmbedding, column-parallel head, vocab-parallel cross-entropy): which ops, with which shapes
// and reductions, per TP degree; the head's GEMMs shrinking with tp; the head's AllReduce hidden behind its
// weight gradient where the plan asks for it; parameter counts and memory that see the shards.
#include <gtest/gtest.h>

#include <string>

#include "sim/ir/schedule.hpp"
#include "tests/sim/schedule_index.hpp"
#include "tests/sim/schedule_test_util.hpp"

namespace domino {
namespace {

using test::build_verified;

const BufferDesc& buffer_of(const Schedule& s, const Region& r) { return s.buffers[size_t(r.buffer)]; }

class VocabParallel : public ::testing::TestWithParam<int> {};

TEST_P(VocabParallel, EmbeddingLooksUpTheShardThenSumsThenAddsPositions) {
  const int tp = GetParam();
  const ModelSpec m = test::tiny_gpt(tp);
  const Schedule s = build_verified(m, make_strategy_plan("megatron-sync", m));
  const test::IndexedSchedule ops(s);
  const int64_t shard = m.vocab / tp, B = m.micro_batch, S = m.seq_len, h = m.hidden;

  const Op& lookup = ops.op("emb.fwd");
  EXPECT_EQ(lookup.code, OpCode::EmbeddingFwd);
  EXPECT_EQ(lookup.n_in, 2) << "the positions are added after the sum, not by every rank's lookup";
  EXPECT_EQ(lookup.in[1].rows(), shard);
  EXPECT_EQ(buffer_of(s, lookup.in[1]).param, ParamKind::TokenEmbedding);
  EXPECT_EQ(lookup.attrs.vocab, m.vocab);

  const Op& ar = ops.op("emb.fwd.ar");
  EXPECT_EQ(ar.code, OpCode::AllReduce);
  EXPECT_EQ(ar.stream, Stream::Comm);
  EXPECT_EQ(ar.attrs.reduce, ReduceOp::Sum);
  EXPECT_EQ(ar.out[0], lookup.out[0]);
  EXPECT_EQ(ar.bytes, double(B * S * h * dtype_bytes(m.dtype)));

  const Op& pos = ops.op("emb.fwd.pos");
  EXPECT_EQ(pos.code, OpCode::PositionAdd);
  EXPECT_GT(pos.index, ar.index);
  EXPECT_EQ(pos.out[0], lookup.out[0]);
  EXPECT_EQ(buffer_of(s, pos.in[1]).param, ParamKind::PositionEmbedding);
  EXPECT_EQ(pos.in[1].rows(), S) << "the positional table stays whole";

  const Op& bwd = ops.op("emb.bwd");
  EXPECT_EQ(bwd.code, OpCode::EmbeddingBwd);
  EXPECT_EQ(bwd.out[0].rows(), shard);
  EXPECT_EQ(bwd.out[1].rows(), S);
  // No collective after the embedding's backward: the input gradient is already replicated.
  for (const Op& op : s.ops) {
    if (op.index > bwd.index && op.phase == Phase::Backward) ADD_FAILURE() << op_id(op) << " after emb.bwd";
  }
}

TEST_P(VocabParallel, HeadKeepsLogitsShardedAndTheLossCombinesThemWithTwoAllReduces) {
  const int tp = GetParam();
  const ModelSpec m = test::tiny_llama(tp);
  const Schedule s = build_verified(m, make_strategy_plan("megatron-sync", m));
  const test::IndexedSchedule ops(s);
  const int64_t shard = m.vocab / tp, rows = int64_t(m.micro_batch) * m.seq_len;
  EXPECT_FALSE(ops.at.count("emb.fwd.pos")) << "llama has no learned positions";

  const Op& logits = ops.op("head.fwd.logits");
  EXPECT_EQ(logits.n, shard);
  EXPECT_EQ(logits.out[0].cols(), shard);
  EXPECT_EQ(buffer_of(s, logits.in[1]).cols, shard);

  const Op& max = ops.op("head.fwd.loss.max");
  const Op& max_ar = ops.op("head.fwd.loss.max.ar");
  const Op& sum = ops.op("head.fwd.loss.sum");
  const Op& sum_ar = ops.op("head.fwd.loss.sum.ar");
  const Op& loss = ops.op("head.loss");
  EXPECT_EQ(max.code, OpCode::LogitMax);
  EXPECT_EQ(sum.code, OpCode::LogitSumExp);
  EXPECT_EQ(loss.code, OpCode::CrossEntropy);
  EXPECT_LT(logits.index, max.index);
  EXPECT_LT(max.index, max_ar.index);
  EXPECT_LT(max_ar.index, sum.index);
  EXPECT_LT(sum.index, sum_ar.index);
  EXPECT_LT(sum_ar.index, loss.index);
  EXPECT_EQ(max_ar.attrs.reduce, ReduceOp::Max);
  EXPECT_EQ(sum_ar.attrs.reduce, ReduceOp::Sum);
  EXPECT_EQ(max_ar.out[0].rows(), rows);
  EXPECT_EQ(max_ar.out[0].cols(), 1);
  EXPECT_EQ(sum_ar.out[0].cols(), 2);
  EXPECT_EQ(max_ar.stream, Stream::Comm);
  EXPECT_EQ(sum_ar.stream, Stream::Comm);
  // Each statistic is read only after its AllReduce.
  EXPECT_TRUE(std::count(sum.deps.begin(), sum.deps.end(), max_ar.index));
  EXPECT_TRUE(std::count(loss.deps.begin(), loss.deps.end(), sum_ar.index));
  EXPECT_EQ(loss.out[1].cols(), shard);
  EXPECT_EQ(max.kind, OpKind::Loss);
  EXPECT_TRUE(memory_bound(sum.kind));
}

INSTANTIATE_TEST_SUITE_P(Tp, VocabParallel, ::testing::Values(1, 2, 4));

// Against tp 1: the degrees above it only (at tp 1 the schedule would be compared with itself).
class VocabParallelSharded : public ::testing::TestWithParam<int> {};

TEST_P(VocabParallelSharded, HeadGemmFlopsShrinkWithTp) {
  const int tp = GetParam();
  const ModelSpec m1 = test::tiny_gpt(1), mt = test::tiny_gpt(tp);
  const auto s1 = build_verified(m1, make_strategy_plan("megatron-sync", m1));
  const auto st = build_verified(mt, make_strategy_plan("megatron-sync", mt));
  const test::IndexedSchedule o1(s1), ot(st);
  for (const char* id : {"head.fwd.logits", "head.bwd.logits.dgrad", "head.bwd.logits.wgrad"}) {
    EXPECT_GT(o1.op(id).flops, 0) << id;
    EXPECT_DOUBLE_EQ(ot.op(id).flops * tp, o1.op(id).flops) << id;
  }
}

INSTANTIATE_TEST_SUITE_P(Tp, VocabParallelSharded, ::testing::Values(2, 4));

// The head's partial input gradient is all-reduced before the final norm's backward; the weight gradient
// runs behind it when the block the backward hands over to (the last MLP) overlaps, else it waits.
TEST(VocabParallelHead, InputGradientAllReduceOverlapsTheWeightGradientWhenThePlanSays) {
  const ModelSpec m = test::tiny_gpt(2);
  for (const bool overlap : {false, true}) {
    BlockPlan b;
    b.bwd_overlap = overlap;
    const Schedule s = build_verified(m, make_uniform_plan(m, b, b, "custom"));
    const test::IndexedSchedule ops(s);
    const Op& dgrad = ops.op("head.bwd.logits.dgrad");
    const Op& ar = ops.op("head.bwd.logits.ar");
    const Op& wgrad = ops.op("head.bwd.logits.wgrad");
    const Op& norm = ops.op("head.bwd.norm");
    EXPECT_EQ(ar.stream, Stream::Comm);
    EXPECT_EQ(ar.out[0], dgrad.out[0]);
    EXPECT_EQ(ar.out[0].cols(), m.hidden);
    EXPECT_TRUE(std::count(ar.deps.begin(), ar.deps.end(), dgrad.index));
    EXPECT_LT(ar.index, wgrad.index);
    EXPECT_LT(wgrad.index, norm.index);
    EXPECT_TRUE(std::count(norm.deps.begin(), norm.deps.end(), ar.index)) << "the norm reads the reduced sum";
    EXPECT_EQ(bool(std::count(wgrad.deps.begin(), wgrad.deps.end(), ar.index)), !overlap) << overlap;
  }
}

TEST(VocabParallelHead, NoCommPlanHasNoCollectiveAtEitherEnd) {
  const ModelSpec m = test::tiny_gpt(2);
  const Schedule s = build_verified(m, make_strategy_plan("no-comm", m));
  for (const Op& op : s.ops) EXPECT_NE(op.code, OpCode::AllReduce) << op_id(op);
  const test::IndexedSchedule ops(s);
  EXPECT_TRUE(ops.at.count("head.fwd.loss.sum") && ops.at.count("head.loss") && ops.at.count("emb.fwd.pos"));
}

// A vocabulary tp does not divide: every rank holds ceil(V/tp) ids, the last one's tail is padding that
// maps beyond the full tensor; every real id has exactly one owner.
TEST(VocabParallelShards, UnevenVocabularyPadsTheLastShard) {
  ModelSpec m = test::tiny_gpt(4);
  m.vocab = 42;  // 4 ranks of 11 ids: 44, two of them padding
  const Schedule s = build_verified(m, make_strategy_plan("megatron-sync", m));
  EXPECT_EQ(m.vocab_per_rank(), 11);
  for (const BufferDesc& b : s.buffers) {
    if (b.role != BufferRole::Param) continue;
    if (b.param != ParamKind::TokenEmbedding && b.param != ParamKind::HeadWeight) continue;
    const bool table = b.param == ParamKind::TokenEmbedding;
    EXPECT_EQ(table ? b.seq : b.cols, 11) << b.name;
    std::vector<int> owners(size_t(m.vocab), 0);
    int padding = 0;
    for (int rank = 0; rank < m.tp; ++rank) {
      for (int64_t i = 0; i < 11; ++i) {
        const ParamCoord at = table ? shard_of(m, b, rank, i, 0) : shard_of(m, b, rank, 0, i);
        const int64_t id = table ? at.row : at.col;
        if (vocab_padding(m, b, at)) {
          ++padding;
          EXPECT_GE(id, m.vocab);
        } else {
          ++owners[size_t(id)];
        }
      }
    }
    EXPECT_EQ(padding, 2) << b.name;
    for (int id = 0; id < m.vocab; ++id) EXPECT_EQ(owners[size_t(id)], 1) << b.name << " id " << id;
  }
  const test::IndexedSchedule ops(s);
  EXPECT_EQ(ops.op("head.fwd.logits").n, 11);
  EXPECT_EQ(ops.op("head.loss").attrs.vocab, 42);
}

TEST(VocabParallelVerify, RejectsAShardOfAnotherWidthThanTheVocabularysSplit) {
  const ModelSpec m = test::tiny_gpt(2);
  Schedule s = build_verified(m, make_strategy_plan("megatron-sync", m));
  for (Op& op : s.ops) {
    if (op.code != OpCode::CrossEntropy) continue;
    op.attrs.vocab = m.vocab + 1;  // 41 ids over 2 ranks take shards of 21, not 20
    EXPECT_NE(op_contract_problem(s, op).find("vocab=41"), std::string::npos) << op_contract_problem(s, op);
    op.attrs.vocab = m.vocab / 2;  // 20 ids over 2 ranks take shards of 10
    EXPECT_NE(op_contract_problem(s, op).find("vocab=20"), std::string::npos);
  }
}

// The embedding and the head count V/tp per rank; the positions and the final norm stay whole: the facts'
// per-rank count is what one rank's schedule allocates as parameters.
TEST(VocabParallelFacts, ParametersAndMemoryCountTheShards) {
  for (const ModelSpec& base : {test::tiny_gpt(1), test::tiny_llama(1)}) {
    for (const int tp : {1, 2, 4}) {
      ModelSpec m = base;
      m.tp = tp;
      int64_t allocated = 0;
      for (const BufferDesc& b : build_verified(m, make_strategy_plan("megatron-sync", m)).buffers)
        if (b.role == BufferRole::Param) allocated += b.elements();
      const ModelFacts f = derive_facts(m);
      EXPECT_EQ(f.params_per_rank, allocated) << m.name << " tp " << tp;
      EXPECT_EQ(f.total_params, derive_facts(base).total_params);
    }
  }
  const ModelSpec m1 = test::tiny_gpt(1), m2 = test::tiny_gpt(2);
  // Memory: the sharded embedding, head and logits make tp 2 hold less of them than tp 1.
  const Schedule s1 = build_verified(m1, make_strategy_plan("megatron-sync", m1));
  const Schedule s2 = build_verified(m2, make_strategy_plan("megatron-sync", m2));
  int64_t vocab_bytes_1 = 0, vocab_bytes_2 = 0;
  for (const auto* s : {&s1, &s2}) {
    for (const BufferDesc& b : s->buffers) {
      const bool vocab = b.param == ParamKind::TokenEmbedding || b.param == ParamKind::HeadWeight ||
                         b.name == "logits" || b.name == "logits.grad";
      if (vocab) (s == &s1 ? vocab_bytes_1 : vocab_bytes_2) += b.elements();
    }
  }
  EXPECT_EQ(vocab_bytes_1, 2 * vocab_bytes_2);
  EXPECT_LT(schedule_memory_bytes(s2), schedule_memory_bytes(s1));
}

}  // namespace
}  // namespace domino
