// cpu_embedding_loss.cpp: the ops at both ends of the model: token (+ positional) embedding lookup and its
// scatter-add gradient, and the softmax cross-entropy loss with its gradient. Token ids travel as floats.
#include "executor/cpu/cpu_views.hpp"

#include <Eigen/Core>
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "sim/base/error.hpp"

namespace domino::cpu {
namespace {

// The id stored at row r of `ids` as an index below `limit`; anything else is a runtime error.
int64_t token_at(const Op& op, const View& ids, int64_t r, int64_t limit, const char* what) {
  const float v = ids.row(r)[0];
  const int64_t t = int64_t(v);
  if (!(v >= 0.0f) || float(t) != v || t >= limit) {
    throw_runtime(fmt::format("op {}: {} {} at row {} is not an integer in [0, {})", op_id(op), what, v, r, limit));
  }
  return t;
}

}  // namespace

void embedding_fwd(const Op& op, const CpuOpContext& ctx) {
  const View ids = view_of(ctx, op.in[0]), table = view_of(ctx, op.in[1]), out = view_of(ctx, op.out[0]);
  const std::optional<View> pos = optional_input(ctx, op, 2);
  for (int64_t r = 0; r < out.rows; ++r) {
    const int64_t t = token_at(op, ids, r, table.rows, "token id");
    if (pos) {
      out.row_array(r) = table.row_array(t) + pos->row_array(out.seq_index(r) - pos->s0);
    } else {
      out.row_array(r) = table.row_array(t);
    }
  }
}

void embedding_bwd(const Op& op, const CpuOpContext& ctx) {
  const View ids = view_of(ctx, op.in[0]), dy = view_of(ctx, op.in[1]), table = view_of(ctx, op.out[0]);
  const std::optional<View> pos = optional_output(ctx, op, 1);
  if (!op.attrs.accumulate) {
    table.all().setZero();
    if (pos) pos->all().setZero();
  }
  for (int64_t r = 0; r < dy.rows; ++r) {
    const int64_t t = token_at(op, ids, r, table.rows, "token id");
    table.row_array(t) += dy.row_array(r);
    if (pos) pos->row_array(dy.seq_index(r) - pos->s0) += dy.row_array(r);
  }
}

// loss = mean over tokens of logsumexp(logits) - logits[target]; dlogits = (softmax - onehot) / N with
// N = batch * seq of the logits buffer (all tokens, also when the op covers a slice and accumulates).
// dlogits may alias the logits: each row reads what it needs before writing.
void cross_entropy(const Op& op, const CpuOpContext& ctx) {
  const View logits = view_of(ctx, op.in[0]);
  const View targets = view_of(ctx, op.in[1]);
  const View dlogits = view_of(ctx, op.out[1]);
  const BufferDesc& buf = ctx.schedule->buffers[size_t(op.in[0].buffer)];
  const double tokens = double(buf.batch * buf.seq);
  const float inv_tokens = float(1.0 / tokens);
  double total = 0.0;
  for (int64_t r = 0; r < logits.rows; ++r) {
    const int64_t t = token_at(op, targets, r, logits.cols, "target id");
    const ArrayRowMap x = logits.row_array(r);
    const float max = x.maxCoeff();
    const float target_logit = x[t];
    ArrayRowMap g = dlogits.row_array(r);
    g = (x - max).exp();
    const double sum = g.cast<double>().sum();
    total += std::log(sum) + double(max) - double(target_logit);
    g *= float(1.0 / (sum * tokens));
    g[t] -= inv_tokens;
  }
  float* loss = view_of(ctx, op.out[0]).row(0);
  if (op.attrs.accumulate) {
    *loss += float(total / tokens);
  } else {
    *loss = float(total / tokens);
  }
}

}  // namespace domino::cpu
