// verify_op.cpp: each opcode's contract as sim/ir/schedule.hpp states it (arity, region bounds, operand
// shapes), checked before any backend forms a pointer, so that a malformed schedule fails with a message
// instead of corrupting memory. One function per opcode family; op_contract_problem dispatches.
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "sim/base/error.hpp"
#include "sim/ir/verify.hpp"
#include "sim/ir/verify_checker.hpp"

namespace domino {
namespace verify {
namespace {

void check_gemm(Checker& c, const Op& op) {
  const Region &i0 = op.in[0], &i1 = op.in[1], &o0 = op.out[0];
  switch (op.code) {
    case OpCode::MatMul:
      if (!c.arity(2, 3, 1, 1) || !c.uniform(i1, "in[1]")) return;
      c.shape(i1, "in[1]", i0.cols(), -1);
      c.shape(o0, "out[0]", i0.rows(), i1.cols());
      if (op.n_in == 3) c.shape(op.in[2], "bias", 1, i1.cols());
      return;
    case OpCode::MatMulDgrad:
      if (!c.arity(2, 2, 1, 1) || !c.uniform(i1, "in[1]")) return;
      c.shape(i1, "in[1]", -1, i0.cols());
      c.shape(o0, "out[0]", i0.rows(), i1.rows());
      return;
    default:  // MatMulWgrad
      if (!c.arity(2, 2, 1, 2) || !c.uniform(o0, "out[0]")) return;
      c.shape(i1, "in[1]", i0.rows(), -1);
      c.shape(o0, "out[0]", i0.cols(), i1.cols());
      if (op.n_out == 2) c.shape(op.out[1], "bias grad", 1, i1.cols());
      return;
  }
}

// Columns per normalised group: attrs.head_dim (QK-norm per head), or the whole row; false when it does
// not divide the row.
bool norm_group(Checker& c, const Op& op, int64_t cols, int64_t* group) {
  *group = op.attrs.head_dim > 0 ? op.attrs.head_dim : cols;
  if (op.attrs.head_dim < 0 || (*group > 0 && cols % *group != 0)) {
    c.fail(fmt::format("has groups of head_dim={} columns for {} columns", op.attrs.head_dim, cols));
    return false;
  }
  return true;
}

void check_norm_fwd(Checker& c, const Op& op) {
  const bool ln = op.code == OpCode::LayerNormFwd;
  const Region& x = op.in[0];
  int64_t g = 0;
  if (!c.arity(ln ? 3 : 2, ln ? 3 : 2, 2, 2) || !norm_group(c, op, x.cols(), &g)) return;
  for (int i = 1; i < op.n_in; ++i) c.shape(op.in[size_t(i)], i == 1 ? "gamma" : "beta", 1, g);
  c.shape(op.out[0], "y", x.rows(), x.cols());
  c.shape(op.out[1], "stats", x.rows(), g > 0 ? 2 * (x.cols() / g) : 2);
}

void check_norm_bwd(Checker& c, const Op& op) {
  const bool layer_norm = op.code == OpCode::LayerNormBwd;
  const int n = op.attrs.chunks;
  if (n < 1 || n + 3 > kMaxIn || (op.attrs.head_dim > 0 && n != 1)) {
    c.fail(fmt::format("has chunks={} (1 with groups of head_dim={})", n, op.attrs.head_dim));
    return;
  }
  if (!c.arity(3 + n, 3 + n, 2, layer_norm ? 3 : 2)) return;
  const Region& x = op.in[0];
  const int64_t rows = x.rows(), h = x.cols();
  int64_t g = 0;
  if (!norm_group(c, op, h, &g)) return;
  if (h % n != 0) c.fail(fmt::format("hidden {} is not divisible by chunks {}", h, n));
  c.shape(op.in[1], "stats", rows, g > 0 ? 2 * (h / g) : 2);
  c.shape(op.in[2], "gamma", 1, g);
  for (int i = 0; i < n; ++i) c.shape(op.in[size_t(3 + i)], kInName[3 + i], rows, h / n);  // dy chunks
  c.shape(op.out[0], "dx", rows, h);
  for (int i = 1; i < op.n_out; ++i) c.shape(op.out[size_t(i)], i == 1 ? "dgamma" : "dbeta", 1, g);
}

// Element-wise (GeLU, ReLU): out and dy shaped as the input. Gated (SwiGLU, GeGLU): the input is
// [gate | up], the output (forward) and dy (backward) half as wide, the backward's output as wide.
void check_activation(Checker& c, const Op& op) {
  const Region &i0 = op.in[0], &i1 = op.in[1], &o0 = op.out[0];
  const OpCode code = op.code;
  const bool fwd = code == OpCode::GeluFwd || code == OpCode::SwigluFwd || code == OpCode::ReluFwd ||
                   code == OpCode::GegluFwd;
  if (!c.arity(fwd ? 1 : 2, fwd ? 1 : 2, 1, 1)) return;
  const bool gated = code == OpCode::SwigluFwd || code == OpCode::SwigluBwd || code == OpCode::GegluFwd ||
                     code == OpCode::GegluBwd;
  if (!gated) {
    if (op.n_in == 2) c.shape(i1, "dy", i0.rows(), i0.cols());
    c.shape(o0, "out[0]", i0.rows(), i0.cols());
    return;
  }
  if (i0.cols() % 2 != 0) c.fail("input [gate|up] has an odd number of columns");
  if (!fwd) c.shape(i1, "dy", i0.rows(), i0.cols() / 2);
  c.shape(o0, "out[0]", i0.rows(), fwd ? i0.cols() / 2 : i0.cols());
}

void check_rope(Checker& c, const Op& op) {
  const Region &i0 = op.in[0], &o0 = op.out[0];
  if (!c.arity(0, 1, 1, 1)) return;
  if (op.attrs.heads <= 0 || op.attrs.head_dim <= 0 || op.attrs.head_dim % 2 != 0 ||
      int64_t(op.attrs.heads) * op.attrs.head_dim > o0.cols()) {
    c.fail(fmt::format("has heads={} head_dim={} for {} columns (head_dim must be even)", op.attrs.heads,
                       op.attrs.head_dim, o0.cols()));
  }
  const int r = op.attrs.rotary_dims;
  if (r < 0 || r % 2 != 0 || r > op.attrs.head_dim)
    c.fail(fmt::format("has rotary_dims={} (even, at most head_dim={})", r, op.attrs.head_dim));
  if (op.n_in == 1) {
    c.shape(i0, "in[0]", o0.rows(), o0.cols());
    c.same_rows(o0, i0, "in[0]");
  }
}

// Q, K, V and P as schedule.hpp's AttnFwd describes them; backward adds dcontext, dQ, dK, dV.
void check_attention_operands(Checker& c, const Op& op, bool backward) {
  const int64_t h = op.attrs.heads, kv = op.attrs.kv_heads, d = op.attrs.head_dim;
  if (h <= 0 || kv <= 0 || d <= 0 || h % kv != 0) {
    c.fail(fmt::format("has heads={} kv_heads={} head_dim={} (positive, heads a multiple of kv_heads)", h, kv,
                       d));
    return;
  }
  const Region &q = op.in[0], &k = op.in[1], &v = op.in[2], &p = backward ? op.in[3] : op.out[1];
  const int64_t kv_end = k.s1, window = op.attrs.window;
  if (!c.shape(q, "Q", -1, h * d) || !c.shape(k, "K", -1, kv * d) || !c.shape(v, "V", -1, kv * d)) return;
  // The first query's first key: position 0, or with a sliding window its position - window + 1.
  const int64_t first = window > 0 ? std::max<int64_t>(0, q.s0 - window + 1) : 0;
  if (window < 0) c.fail(fmt::format("has window={}", window));
  if (k.s0 > first || v.s0 != k.s0) c.fail(fmt::format("K/V must start at seq {} at the latest, as one", first));
  if (op.attrs.overwrite_end < 0 || op.attrs.overwrite_end > kv_end || (op.attrs.overwrite_end > 0 && !backward))
    c.fail(fmt::format("has overwrite_end={} (a backward key position up to kv_end {})", op.attrs.overwrite_end, kv_end));
  if (q.s1 > kv_end) c.fail(fmt::format("query rows end at seq {} beyond kv_end {}", q.s1, kv_end));
  if (!c.same_rows(k, v, "V") || k.b1 - k.b0 != q.b1 - q.b0) c.fail("K/V do not cover the batch range of Q");
  if (p.cols() % h != 0 || p.cols() / h < kv_end) {
    c.fail(fmt::format("P has {} columns, not heads x seq_len covering the keys", p.cols()));
  }
  c.same_rows(q, p, "P");
  if (!backward) {
    c.shape(op.out[0], "context", -1, h * d);
    c.same_rows(q, op.out[0], "context");
    return;
  }
  c.shape(op.in[4], "dcontext", -1, h * d);
  c.same_rows(q, op.in[4], "dcontext");
  c.shape(op.out[0], "dQ", -1, h * d);
  c.same_rows(q, op.out[0], "dQ");
  for (int i = 1; i < 3; ++i) {
    c.shape(op.out[size_t(i)], i == 1 ? "dK" : "dV", -1, kv * d);
    c.same_rows(k, op.out[size_t(i)], i == 1 ? "dK" : "dV");
  }
}

void check_attention(Checker& c, const Op& op) {
  const bool backward = op.code == OpCode::AttnBwd;
  if (backward ? c.arity(5, 5, 3, 3) : c.arity(3, 3, 2, 2)) check_attention_operands(c, op, backward);
}

void check_residual_add(Checker& c, const Op& op) {
  const Region &i0 = op.in[0], &i1 = op.in[1], &o0 = op.out[0];
  if (!c.arity(2, 3, 1, 1)) return;
  c.shape(i1, "in[1]", i0.rows(), i0.cols());
  c.shape(o0, "out[0]", i0.rows(), i0.cols());
  if (op.n_in == 3) c.shape(op.in[2], "bias", 1, i0.cols());
}

// A vocabulary-parallel op's shard is `width` ids wide: the model's vocab_per_rank(), the split every rank
// shares (the vocabulary padded to a multiple of vocab_divisible_by x tp).
void check_vocab(Checker& c, const Schedule& s, const Op& op, int64_t width) {
  const int64_t vocab = op.attrs.vocab, tp = s.model.tp;
  if (vocab < 0 || (vocab > 0 && width != vocab_shard_width(vocab, tp, s.model.vocab_divisible_by))) {
    c.fail(fmt::format("has vocab={} for shards of {} ids on {} ranks", vocab, width, tp));
  }
}

// A positional table (or its gradient) [1,seq_len,h] must hold a row for every seq index of `rows`.
void check_positional_table(Checker& c, const Region& pos, const Region& rows) {
  if (c.uniform(pos, "positional table") && c.shape(pos, "positional table", -1, rows.cols()) &&
      (pos.s0 > rows.s0 || pos.s1 < rows.s1)) {
    c.fail(fmt::format("positional table does not cover seq [{},{})", rows.s0, rows.s1));
  }
}

void check_embedding(Checker& c, const Schedule& s, const Op& op) {
  const bool fwd = op.code == OpCode::EmbeddingFwd;
  if (!c.arity(2, 2, 1, fwd ? 1 : 2)) return;
  const Region& tokens = op.in[0];
  const Region& rows = fwd ? op.out[0] : op.in[1];   // [B,S,h] activations
  const Region& table = fwd ? op.in[1] : op.out[0];  // [1,n,h]: this rank's vocabulary shard
  c.shape(tokens, "token ids", rows.rows(), 1);
  c.same_rows(rows, tokens, "token ids");
  if (c.uniform(table, "table")) c.shape(table, "table", -1, rows.cols());
  check_vocab(c, s, op, table.rows());
  if (op.n_out == 2) check_positional_table(c, op.out[1], rows);
}

// On a sequence-sharded buffer (attrs.sp_groups = g > 0) the rows are a rank's S/tp rows of the layout
// SpLayout{S = the table's rows, g, tp}: the table must start at 0 and S split into g x tp parts.
void check_position_add(Checker& c, const Schedule& s, const Op& op) {
  const Region &x = op.in[0], &y = op.out[0], &table = op.in[1];
  if (!c.arity(2, 2, 1, 1)) return;
  c.shape(y, "out[0]", x.rows(), x.cols());
  c.same_rows(x, y, "out[0]");
  check_positional_table(c, table, x);
  const int64_t g = op.attrs.sp_groups, tp = s.model.tp, seq = table.s1 - table.s0;
  if (g < 0 || (g > 0 && (table.s0 != 0 || seq % (g * tp) != 0 || x.s1 > seq / tp))) {
    c.fail(
        fmt::format("has sp_groups={} for a positional table of {} rows and local rows up to {} on {} ranks",
                    g, seq, x.s1, tp));
  }
}

// AllGather / ReduceScatter (schedule.hpp): the sharded region holds attrs.chunks = n whole groups of this
// rank's part rows each, the full region the same groups' tp parts each; same batch range and columns.
void check_sp_collective(Checker& c, const Schedule& s, const Op& op) {
  if (!c.arity(1, 1, 1, 1)) return;
  const bool gather = op.code == OpCode::AllGather;
  const Region &sharded = gather ? op.in[0] : op.out[0], &full = gather ? op.out[0] : op.in[0];
  const int64_t n = op.attrs.chunks, tp = s.model.tp;
  if (op.stream != Stream::Comm) c.fail("runs on the compute stream (collectives run on comm)");
  if (!gather && op.attrs.reduce != ReduceOp::Sum) c.fail("reduces with max (a ReduceScatter sums)");
  c.shape(full, gather ? "out[0]" : "in[0]", -1, sharded.cols());
  if (full.b1 - full.b0 != sharded.b1 - sharded.b0) c.fail("covers another batch range on each side");
  const int64_t part_rows = sharded.s1 - sharded.s0, full_rows = full.s1 - full.s0;
  if (n < 1 || part_rows < n || part_rows % n != 0 || full_rows % n != 0 ||
      full_rows / n != tp * (part_rows / n) || sharded.s0 % (part_rows / n) != 0) {
    c.fail(
        fmt::format("has chunks={} groups for {} local and {} full rows per batch entry on {} ranks "
                    "(each group: tp parts of the local group's rows, starting on a group)",
                    n, part_rows, full_rows, tp));
  }
}

// LogitMax, LogitSumExp and CrossEntropy: per-token statistics of one vocabulary shard of the logits.
void check_loss(Checker& c, const Schedule& s, const Op& op) {
  const Region& logits = op.in[0];
  const int n_in = op.code == OpCode::LogitMax ? 1 : op.code == OpCode::LogitSumExp ? 3 : 4;
  const int n_out = op.code == OpCode::CrossEntropy ? 2 : 1;
  if (!c.arity(n_in, n_in, n_out, n_out)) return;
  check_vocab(c, s, op, logits.cols());
  if (n_in > 1) {
    c.shape(op.in[1], "targets", logits.rows(), 1);
    c.same_rows(logits, op.in[1], "targets");
    c.shape(op.in[2], "max", logits.rows(), 1);
    c.same_rows(logits, op.in[2], "max");
  }
  if (n_in > 3) {
    c.shape(op.in[3], "sums", logits.rows(), 2);
    c.same_rows(logits, op.in[3], "sums");
  }
  switch (op.code) {
    case OpCode::LogitMax:
      c.shape(op.out[0], "max", logits.rows(), 1);
      c.same_rows(logits, op.out[0], "max");
      return;
    case OpCode::LogitSumExp:
      c.shape(op.out[0], "sums", logits.rows(), 2);
      c.same_rows(logits, op.out[0], "sums");
      return;
    default:
      c.shape(op.out[0], "loss", 1, 1);
      c.shape(op.out[1], "dlogits", logits.rows(), logits.cols());
      c.same_rows(logits, op.out[1], "dlogits");
      return;
  }
}

void check_optimizer(Checker& c, const Op& op) {
  const Region& grad = op.in[0];
  const int outs = op.code == OpCode::AdamStep ? 3 : 2;
  if (!c.arity(1, 1, outs, outs)) return;
  for (int i = 0; i < outs; ++i) {
    c.shape(op.out[size_t(i)], kOutName[i], grad.rows(), grad.cols());
    c.same_rows(grad, op.out[size_t(i)], kOutName[i]);
  }
}

void check_operands(Checker& c, const Schedule& s, const Op& op) {
  switch (op.code) {
    case OpCode::MatMul:
    case OpCode::MatMulDgrad:
    case OpCode::MatMulWgrad:
      return check_gemm(c, op);
    case OpCode::LayerNormFwd:
    case OpCode::RmsNormFwd:
      return check_norm_fwd(c, op);
    case OpCode::LayerNormBwd:
    case OpCode::RmsNormBwd:
      return check_norm_bwd(c, op);
    case OpCode::GeluFwd:
    case OpCode::GeluBwd:
    case OpCode::SwigluFwd:
    case OpCode::SwigluBwd:
    case OpCode::ReluFwd:
    case OpCode::ReluBwd:
    case OpCode::GegluFwd:
    case OpCode::GegluBwd:
      return check_activation(c, op);
    case OpCode::RopeFwd:
    case OpCode::RopeBwd:
      return check_rope(c, op);
    case OpCode::AttnFwd:
    case OpCode::AttnBwd:
      return check_attention(c, op);
    case OpCode::ResidualAdd:
      return check_residual_add(c, op);
    case OpCode::EmbeddingFwd:
    case OpCode::EmbeddingBwd:
      return check_embedding(c, s, op);
    case OpCode::PositionAdd:
      return check_position_add(c, s, op);
    case OpCode::AllGather:
    case OpCode::ReduceScatter:
      return check_sp_collective(c, s, op);
    case OpCode::LogitMax:
    case OpCode::LogitSumExp:
    case OpCode::CrossEntropy:
      return check_loss(c, s, op);
    case OpCode::AdamStep:
    case OpCode::SgdStep:
      return check_optimizer(c, op);
    case OpCode::AllReduce:
      // In place: every backend reduces in[0] into itself, so out[0] must name that very region.
      if (c.arity(1, 1, 1, 1) && !(op.in[0] == op.out[0])) c.fail("reduces in[0] but writes a different out[0]");
      if (op.attrs.reduce != ReduceOp::Sum && op.attrs.reduce != ReduceOp::Max)
        c.fail(fmt::format("has an unknown reduction {}", int(op.attrs.reduce)));
      return;
  }
  c.fail(fmt::format("has an unknown opcode {}", int(op.code)));
}

}  // namespace
}  // namespace verify

std::string op_contract_problem(const Schedule& s, const Op& op) {
  verify::Checker c(s, op);
  if (op.n_in > kMaxIn || op.n_out > kMaxOut) return "has too many operands";
  for (int i = 0; i < op.n_in; ++i) c.bounds(op.in[size_t(i)], verify::kInName[i]);
  for (int i = 0; i < op.n_out; ++i) c.bounds(op.out[size_t(i)], verify::kOutName[i]);
  if (!c.problem().empty()) return c.problem();
  if (op.n_in == 0 && op.code != OpCode::RopeFwd && op.code != OpCode::RopeBwd) return "has no inputs";
  if (op.n_out == 0) return "has no outputs";
  verify::check_operands(c, s, op);
  return c.problem();
}

void verify_op(const Schedule& s, const Op& op) {
  const std::string problem = op_contract_problem(s, op);
  if (!problem.empty()) throw_bad_input(fmt::format("op {} (#{}) {}", op_id(op), op.index, problem));
}

void verify_ops(const Schedule& s) {
  for (const Op& op : s.ops) verify_op(s, op);
}

}  // namespace domino
