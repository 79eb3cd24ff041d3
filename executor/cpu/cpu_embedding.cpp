// cpu_embedding.cpp: the token embedding of one vocabulary shard (lookup and scatter-add gradient) and the
// positional embedding (on a sequence-sharded buffer: each local row at its position in the plan's group
// layout). Token ids travel as floats; a token outside this rank's shard contributes zeros forward and
// nothing backward (the shards are summed by an AllReduce, or a ReduceScatter, of the output).
#include <fmt/format.h>

#include <Eigen/Core>
#include <string>

#include "executor/cpu/cpu_views.hpp"
#include "executor/runtime/sp_collective.hpp"
#include "sim/base/error.hpp"

namespace domino::cpu {

// The id stored at row r of `ids` as an index below `limit`; anything else is a runtime error.
int64_t token_at(const Op& op, const View& ids, int64_t r, int64_t limit, const char* what) {
  const float v = ids.row(r)[0];
  const int64_t t = int64_t(v);
  if (!(v >= 0.0f) || float(t) != v || t >= limit) {
    throw_runtime(
        fmt::format("op {}: {} {} at row {} is not an integer in [0, {})", op_id(op), what, v, r, limit));
  }
  return t;
}

void embedding_fwd(const Op& op, const CpuOpContext& ctx) {
  const View ids = view_of(ctx, op.in[0]), table = view_of(ctx, op.in[1]), out = view_of(ctx, op.out[0]);
  const VocabShard shard = vocab_shard(op.attrs, ctx.rank, table.rows);
  for (int64_t r = 0; r < out.rows; ++r) {
    const int64_t t = token_at(op, ids, r, shard.limit, "token id");
    if (shard.holds(t)) {
      out.row_array(r) = table.row_array(t - shard.first);
    } else {
      out.row_array(r).setZero();
    }
  }
}

void embedding_bwd(const Op& op, const CpuOpContext& ctx) {
  const View ids = view_of(ctx, op.in[0]), dy = view_of(ctx, op.in[1]), table = view_of(ctx, op.out[0]);
  const std::optional<View> pos = optional_output(ctx, op, 1);
  const VocabShard shard = vocab_shard(op.attrs, ctx.rank, table.rows);
  if (!op.attrs.accumulate) table.all().setZero();
  if (pos && !op.attrs.accumulate_params) pos->all().setZero();
  for (int64_t r = 0; r < dy.rows; ++r) {
    const int64_t t = token_at(op, ids, r, shard.limit, "token id");
    if (shard.holds(t)) table.row_array(t - shard.first) += dy.row_array(r);
    if (pos) pos->row_array(dy.seq_index(r) - pos->s0) += dy.row_array(r);
  }
}

void position_add(const Op& op, const CpuOpContext& ctx) {
  const View x = view_of(ctx, op.in[0]), pos = view_of(ctx, op.in[1]), out = view_of(ctx, op.out[0]);
  if (op.attrs.sp_groups > 0) {  // a sequence-sharded buffer: local rows come from the groups' positions
    const SpLayout layout = sp_position_layout(*ctx.schedule, op);
    for (int64_t r = 0; r < out.rows; ++r)
      out.row_array(r) = x.row_array(r) + pos.row_array(layout.position(ctx.rank, x.seq_index(r)));
    return;
  }
  for (int64_t r = 0; r < out.rows; ++r) {
    out.row_array(r) = x.row_array(r) + pos.row_array(x.seq_index(r) - pos.s0);
  }
}

}  // namespace domino::cpu
