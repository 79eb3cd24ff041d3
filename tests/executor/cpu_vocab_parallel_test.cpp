// cpu_vocab_parallel_test.cpp: the CPU kernels of the vocabulary-parallel ends, rank by rank, with the
// AllReduces between them done by hand: two shards of the embedding sum to the whole lookup and split its
// gradient; two shards of the cross-entropy (the second padded) give the whole vocabulary's loss and
// dlogits, the padding column taking no part.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "sim/base/error.hpp"
#include "tests/executor/cpu_test_util.hpp"

namespace domino::cputest {
namespace {

constexpr int64_t kV = 7, kShard = 4;  // tp 2: ids [0,4) and [4,7) + one padding column

struct ShardBed : Bed {
  ShardBed() {
    s.model.tp = 2;
    s.model.vocab = int(kV);
  }
  OpAttrs vocab_attrs(bool accumulate = false) const {
    OpAttrs a;
    a.vocab = int32_t(kV);
    a.accumulate = accumulate;
    return a;
  }
};

TEST(CpuVocabParallel, EmbeddingShardsSumToTheWholeLookupAndSplitItsGradient) {
  ShardBed t;
  const int64_t h = 3;
  const int32_t table = t.buffer("table", 1, kV, h);
  const int32_t shard[2] = {t.buffer("tok.r0", 1, kShard, h), t.buffer("tok.r1", 1, kShard, h)};
  const int32_t ids = t.buffer("ids", 2, 3, 1);
  const int32_t dy = t.buffer("dy", 2, 3, h);
  const int32_t out[2] = {t.buffer("x0.r0", 2, 3, h), t.buffer("x0.r1", 2, 3, h)};
  const int32_t dshard[2] = {t.buffer("dtok.r0", 1, kShard, h), t.buffer("dtok.r1", 1, kShard, h)};
  const float tokens[6] = {0, 6, 3, 4, 6, 1};  // both shards, a repeated id, the last real id
  for (int i = 0; i < 6; ++i) t.raw(ids)[size_t(i)] = tokens[i];
  const Mat full = t.get(t.whole(table)), g = t.get(t.whole(dy));
  for (int r = 0; r < 2; ++r) {
    Mat rows(kShard, h, 123.0);  // the padding row of rank 1 holds garbage that must never be read
    for (int64_t i = 0; i < kShard && r * kShard + i < kV; ++i)
      for (int64_t j = 0; j < h; ++j) rows(i, j) = full(r * kShard + i, j);
    t.set(t.whole(shard[r]), rows);
  }
  Mat sum(6, h), want(6, h), want_grad(kV, h);
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t j = 0; j < h; ++j) {
      want(r, j) = full(int64_t(tokens[r]), j);
      want_grad(int64_t(tokens[r]), j) += g(r, j);
    }
  for (int r = 0; r < 2; ++r) {
    t.rank = r;
    t.poison(t.whole(out[r]));
    t.run(
        t.make(OpCode::EmbeddingFwd, {t.whole(ids), t.whole(shard[r])}, {t.whole(out[r])}, t.vocab_attrs()));
    const Mat got = t.get(t.whole(out[r]));
    for (int64_t i = 0; i < 6; ++i) {
      const bool mine = int64_t(tokens[i]) / kShard == r;
      for (int64_t j = 0; j < h; ++j) {
        EXPECT_EQ(got(i, j), mine ? want(i, j) : 0.0) << "rank " << r << " row " << i;
        sum(i, j) += got(i, j);
      }
    }
    t.poison(t.whole(dshard[r]));
    t.run(t.make(OpCode::EmbeddingBwd, {t.whole(ids), t.whole(dy)}, {t.whole(dshard[r])}, t.vocab_attrs()));
    Mat want_shard(kShard, h);
    for (int64_t i = 0; i < kShard && r * kShard + i < kV; ++i)
      for (int64_t j = 0; j < h; ++j) want_shard(i, j) = want_grad(r * kShard + i, j);
    t.expect_near(t.whole(dshard[r]), want_shard, 1e-6, 1e-6, "table gradient shard");
  }
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < h; ++j)
      EXPECT_EQ(sum(i, j), want(i, j)) << "the AllReduce of the shards, row " << i;
}

TEST(CpuVocabParallel, PositionAddAddsTheRowOfEachSeqIndex) {
  Bed t;
  const int64_t h = 4;
  const int32_t x = t.buffer("x", 2, 3, h), pos = t.buffer("pos", 1, 3, h), y = t.buffer("y", 2, 3, h);
  const Mat xv = t.get(t.whole(x)), pv = t.get(t.whole(pos));
  Mat want(6, h);
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t j = 0; j < h; ++j) want(r, j) = xv(r, j) + pv(r % 3, j);
  t.poison(t.whole(y));
  t.run(t.make(OpCode::PositionAdd, {t.whole(x), t.whole(pos)}, {t.whole(y)}));
  t.expect_near(t.whole(y), want, 1e-6, 1e-6, "x + pos");
  t.run(
      t.make(OpCode::PositionAdd, {t.whole(x), t.whole(pos)}, {t.whole(x)}));  // in place, as the IR uses it
  t.expect_near(t.whole(x), want, 1e-6, 1e-6, "in place");
}

// Whole-vocabulary reference: mean over rows of logsumexp - target logit, and its gradient.
double reference_loss(const Mat& x, const std::vector<int64_t>& targets, Mat* grad) {
  double total = 0;
  const double n = double(x.rows);
  for (int64_t r = 0; r < x.rows; ++r) {
    double mx = -1e300, sum = 0;
    for (int64_t j = 0; j < x.cols; ++j) mx = std::max(mx, x(r, j));
    for (int64_t j = 0; j < x.cols; ++j) sum += std::exp(x(r, j) - mx);
    total += std::log(sum) + mx - x(r, targets[size_t(r)]);
    for (int64_t j = 0; j < x.cols; ++j)
      (*grad)(r, j) = (std::exp(x(r, j) - mx) / sum - (j == targets[size_t(r)] ? 1.0 : 0.0)) / n;
  }
  return total / n;
}

TEST(CpuVocabParallel, ShardedCrossEntropyEqualsTheWholeVocabularys) {
  ShardBed t;
  const int32_t full = t.buffer("logits.full", 2, 3, kV, -4.0, 4.0);
  const int32_t targets = t.buffer("targets", 2, 3, 1);
  const std::vector<int64_t> target_ids{6, 0, 3, 4, 5, 3};  // both shards
  for (size_t i = 0; i < 6; ++i) t.raw(targets)[i] = float(target_ids[i]);
  int32_t logits[2], max[2], sums[2], loss[2], dlogits[2];
  for (int r = 0; r < 2; ++r) {
    logits[r] = t.buffer("logits", 2, 3, kShard, 90.0, 100.0);  // the padding column: far above the rest
    max[r] = t.buffer("loss.max", 2, 3, 1);
    sums[r] = t.buffer("loss.sums", 2, 3, 2);
    loss[r] = t.buffer("loss", 1, 1, 1);
    dlogits[r] = t.buffer("logits.grad", 2, 3, kShard);
  }
  const Mat x = t.get(t.whole(full));
  for (int r = 0; r < 2; ++r) {
    Mat shard = t.get(t.whole(logits[r]));
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t c = 0; c < kShard && r * kShard + c < kV; ++c) shard(i, c) = x(i, r * kShard + c);
    t.set(t.whole(logits[r]), shard);
  }
  // Each step on both ranks, then the AllReduce by hand.
  const auto all_reduce = [&](const int32_t* bufs, bool take_max) {
    std::vector<float>& a = t.raw(bufs[0]);
    std::vector<float>& b = t.raw(bufs[1]);
    for (size_t i = 0; i < a.size(); ++i) a[i] = b[i] = take_max ? std::max(a[i], b[i]) : a[i] + b[i];
  };
  for (int r = 0; r < 2; ++r) {
    t.rank = r;
    t.run(t.make(OpCode::LogitMax, {t.whole(logits[r])}, {t.whole(max[r])}, t.vocab_attrs()));
  }
  all_reduce(max, true);
  for (int r = 0; r < 2; ++r) {
    t.rank = r;
    t.run(t.make(OpCode::LogitSumExp, {t.whole(logits[r]), t.whole(targets), t.whole(max[r])},
                 {t.whole(sums[r])}, t.vocab_attrs()));
  }
  all_reduce(sums, false);
  Mat grad(6, kV);
  const double want = reference_loss(x, target_ids, &grad);
  for (int r = 0; r < 2; ++r) {
    t.rank = r;
    t.poison(t.whole(dlogits[r]));
    t.run(t.make(OpCode::CrossEntropy,
                 {t.whole(logits[r]), t.whole(targets), t.whole(max[r]), t.whole(sums[r])},
                 {t.whole(loss[r]), t.whole(dlogits[r])}, t.vocab_attrs()));
    EXPECT_NEAR(t.raw(loss[r])[0], want, 1e-6 * std::abs(want)) << "rank " << r;
    Mat want_shard(6, kShard);  // padding column: 0
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t c = 0; c < kShard && r * kShard + c < kV; ++c) want_shard(i, c) = grad(i, r * kShard + c);
    t.expect_near(t.whole(dlogits[r]), want_shard, 1e-7, 1e-5, "dlogits shard");
  }
}

// 5 ids over 4 ranks: shards of 2, the last rank's ids 6 and 7 are all padding. Its statistics are neutral
// (a finite max below every logit, a zero sum, no target) and its dlogits zero.
TEST(CpuVocabParallel, AShardOfPaddingOnlyContributesNothing) {
  Bed t;
  t.s.model.tp = 4;
  t.rank = 3;
  OpAttrs a;
  a.vocab = 5;
  const int32_t logits = t.buffer("logits", 1, 3, 2), targets = t.buffer("targets", 1, 3, 1);
  const int32_t max = t.buffer("max", 1, 3, 1), sums = t.buffer("sums", 1, 3, 2);
  const int32_t loss = t.buffer("loss", 1, 1, 1), dlogits = t.buffer("dlogits", 1, 3, 2);
  for (int i = 0; i < 3; ++i) t.raw(targets)[size_t(i)] = float(i + 2);
  t.run(t.make(OpCode::LogitMax, {t.whole(logits)}, {t.whole(max)}, a));
  for (float m : t.raw(max)) {
    EXPECT_TRUE(std::isfinite(m));
    EXPECT_LT(m, -1e30f);
  }
  for (float& m : t.raw(max)) m = 0.5f;  // what the group's max-AllReduce brings back
  t.run(t.make(OpCode::LogitSumExp, {t.whole(logits), t.whole(targets), t.whole(max)}, {t.whole(sums)}, a));
  for (float v : t.raw(sums)) EXPECT_EQ(v, 0.0f);
  for (size_t i = 0; i < 3; ++i) t.raw(sums)[2 * i] = 2.0f;  // the group's sum of exp
  t.poison(t.whole(dlogits));
  t.run(t.make(OpCode::CrossEntropy, {t.whole(logits), t.whole(targets), t.whole(max), t.whole(sums)},
               {t.whole(loss), t.whole(dlogits)}, a));
  for (float g : t.raw(dlogits)) EXPECT_EQ(g, 0.0f);
  EXPECT_NEAR(t.raw(loss)[0], std::log(2.0) + 0.5, 1e-6);  // log(sum) + max - 0 (target elsewhere)
}

TEST(CpuVocabParallel, TargetOutsideTheVocabularyIsAnErrorNamingTheOp) {
  ShardBed t;
  const int32_t logits = t.buffer("logits", 1, 2, kShard), targets = t.buffer("targets", 1, 2, 1);
  const int32_t max = t.buffer("max", 1, 2, 1), sums = t.buffer("sums", 1, 2, 2);
  t.raw(targets)[0] = 1.0f;
  t.raw(targets)[1] = float(kV);  // the padding id of rank 1: not a real token
  t.rank = 1;
  const Op op = t.make(OpCode::LogitSumExp, {t.whole(logits), t.whole(targets), t.whole(max)},
                       {t.whole(sums)}, t.vocab_attrs());
  try {
    t.run(op);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(std::string(e.what()).find("target id"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace domino::cputest
