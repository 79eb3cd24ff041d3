// cpu_loss.cpp: the vocabulary-parallel cross-entropy (Megatron-LM's), in three steps around two
// AllReduces: the per-token max over this shard's logits; the sum of exp(logit - global max) and the
// target's logit when it lies in this shard; then the loss and this shard's dlogits from the global sums.
// Columns of the logits are vocabulary ids [rank*n, rank*n + n); ids at or beyond the vocabulary are
// padding and take no part.
#include <Eigen/Core>
#include <cmath>
#include <limits>

#include "executor/cpu/cpu_views.hpp"

namespace domino::cpu {

void logit_max(const Op& op, const CpuOpContext& ctx) {
  const View logits = view_of(ctx, op.in[0]), max = view_of(ctx, op.out[0]);
  const int64_t n = vocab_shard(op.attrs, ctx.rank, logits.cols).real();
  for (int64_t r = 0; r < logits.rows; ++r) {
    // A shard of padding only (tiny vocabularies on many ranks) gives the lowest finite float: it never
    // wins the max over the group, and the NaN/Inf scan of the outputs stays quiet.
    max.row(r)[0] = n > 0 ? logits.row_array(r).head(n).maxCoeff() : std::numeric_limits<float>::lowest();
  }
}

void logit_sum_exp(const Op& op, const CpuOpContext& ctx) {
  const View logits = view_of(ctx, op.in[0]), targets = view_of(ctx, op.in[1]), max = view_of(ctx, op.in[2]);
  const View sums = view_of(ctx, op.out[0]);
  const VocabShard shard = vocab_shard(op.attrs, ctx.rank, logits.cols);
  const int64_t n = shard.real();
  for (int64_t r = 0; r < logits.rows; ++r) {
    const int64_t t = token_at(op, targets, r, shard.limit, "target id");
    const float m = max.row(r)[0];
    double sum = 0;
    const float* x = logits.row(r);
    for (int64_t c = 0; c < n; ++c) sum += std::exp(double(x[c] - m));
    sums.row(r)[0] = float(sum);
    sums.row(r)[1] = shard.holds(t) ? x[t - shard.first] : 0.0f;
  }
}

// loss = mean over tokens of log(sum) + max - target logit; dlogits = (exp(logit - max) / sum - onehot) / N
// with N = batch * seq of the logits buffer (all tokens, also when the op covers a slice and accumulates).
// dlogits may alias the logits: each row reads what it needs before writing.
void cross_entropy(const Op& op, const CpuOpContext& ctx) {
  const View logits = view_of(ctx, op.in[0]), targets = view_of(ctx, op.in[1]);
  const View max = view_of(ctx, op.in[2]), sums = view_of(ctx, op.in[3]), dlogits = view_of(ctx, op.out[1]);
  const VocabShard shard = vocab_shard(op.attrs, ctx.rank, logits.cols);
  const int64_t n = shard.real();
  const BufferDesc& buf = ctx.schedule->buffers[size_t(op.in[0].buffer)];
  const double tokens = double(buf.batch * buf.seq);
  const float inv_tokens = float(1.0 / tokens);
  double total = 0.0;
  for (int64_t r = 0; r < logits.rows; ++r) {
    const int64_t t = token_at(op, targets, r, shard.limit, "target id");
    const float m = max.row(r)[0];
    const double sum = sums.row(r)[0];
    total += std::log(sum) + double(m) - double(sums.row(r)[1]);
    ArrayRowMap g = dlogits.row_array(r);
    const ArrayRowMap x = logits.row_array(r);
    g.head(n) = (x.head(n) - m).exp() * float(1.0 / (sum * tokens));
    g.tail(logits.cols - n).setZero();
    if (shard.holds(t)) g[t - shard.first] -= inv_tokens;
  }
  float* loss = view_of(ctx, op.out[0]).row(0);
  if (op.attrs.accumulate) {
    *loss += float(total / tokens);
  } else {
    *loss = float(total / tokens);
  }
}

}  // namespace domino::cpu
