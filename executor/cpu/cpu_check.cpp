// cpu_check.cpp: what every CPU kernel requires of its op (arity, region bounds, operand shapes), checked
// before any pointer is formed so that a malformed schedule fails with a message instead of corrupting
// memory. Messages go through fmt: GCC 12 warns falsely (-Wrestrict) on chains of std::string operator+.
#include <fmt/format.h>

#include <string>

#include "executor/cpu/cpu_views.hpp"

namespace domino::cpu {
namespace {

// Operand names as literals: run_cpu_op validates every call, so the happy path must not build strings.
constexpr const char* kInName[kMaxIn] = {"in[0]", "in[1]", "in[2]", "in[3]", "in[4]", "in[5]", "in[6]", "in[7]"};
constexpr const char* kOutName[kMaxOut] = {"out[0]", "out[1]", "out[2]", "out[3]"};

class Checker {
 public:
  Checker(const Schedule& s, const Op& op) : s_(s), op_(op) {}
  const std::string& problem() const { return err_; }

  bool fail(const std::string& m) {
    if (err_.empty()) err_ = m;
    return false;
  }
  bool arity(int min_in, int max_in, int min_out, int max_out) {
    if (op_.n_in < min_in || op_.n_in > max_in || op_.n_out < min_out || op_.n_out > max_out) {
      return fail(fmt::format("has {} inputs and {} outputs, expected {} and {}", op_.n_in, op_.n_out,
                              range(min_in, max_in), range(min_out, max_out)));
    }
    return true;
  }
  bool bounds(const Region& r, const char* what) {
    if (r.buffer < 0 || size_t(r.buffer) >= s_.buffers.size()) {
      return fail(fmt::format("{} names buffer {} of {}", what, r.buffer, s_.buffers.size()));
    }
    const BufferDesc& b = s_.buffers[size_t(r.buffer)];
    if (r.b0 < 0 || r.b0 > r.b1 || r.b1 > b.batch || r.s0 < 0 || r.s0 > r.s1 || r.s1 > b.seq || r.c0 < 0 ||
        r.c0 > r.c1 || r.c1 > b.cols) {
      return fail(fmt::format("{} {} is outside buffer '{}' [{},{},{}]", what, box(r), b.name, b.batch, b.seq, b.cols));
    }
    return true;
  }
  // rows/cols < 0 mean "any".
  bool shape(const Region& r, const char* what, int64_t rows, int64_t cols) {
    if ((rows >= 0 && r.rows() != rows) || (cols >= 0 && r.cols() != cols)) {
      return fail(
          fmt::format("{} {} is {}x{}, expected {}x{}", what, box(r), r.rows(), r.cols(), dim(rows), dim(cols)));
    }
    return true;
  }
  // One uniformly strided block (weights, biases, whole-buffer operands).
  bool uniform(const Region& r, const char* what) {
    const BufferDesc& b = s_.buffers[size_t(r.buffer)];
    if (r.b1 - r.b0 > 1 && !(r.s0 == 0 && r.s1 == b.seq)) {
      return fail(
          fmt::format("{} {} must be one strided block (full seq range or one batch entry)", what, box(r)));
    }
    return true;
  }
  // Same batch count and seq range length: the row-wise correspondence of per-batch kernels.
  bool same_rows(const Region& a, const Region& b, const char* what) {
    if (a.b1 - a.b0 != b.b1 - b.b0 || a.s1 - a.s0 != b.s1 - b.s0) {
      return fail(fmt::format("{} {} does not have the batch/seq extent of {}", what, box(b), box(a)));
    }
    return true;
  }

 private:
  static std::string range(int lo, int hi) {
    return lo == hi ? std::to_string(lo) : fmt::format("{}..{}", lo, hi);
  }
  static std::string dim(int64_t v) { return v < 0 ? std::string("*") : std::to_string(v); }
  static std::string box(const Region& r) {
    return fmt::format("[{}:{},{}:{},{}:{})", r.b0, r.b1, r.s0, r.s1, r.c0, r.c1);
  }
  const Schedule& s_;
  const Op& op_;
  std::string err_;
};

void check_attention(Checker& c, const Op& op, bool backward) {
  const int64_t h = op.attrs.heads, kv = op.attrs.kv_heads, d = op.attrs.head_dim;
  if (h <= 0 || kv <= 0 || d <= 0 || h % kv != 0) {
    c.fail(fmt::format("has heads={} kv_heads={} head_dim={} (positive, heads a multiple of kv_heads)", h, kv, d));
    return;
  }
  const Region &q = op.in[0], &k = op.in[1], &v = op.in[2], &p = backward ? op.in[3] : op.out[1];
  const int64_t kv_end = k.s1;
  if (!c.shape(q, "Q", -1, h * d) || !c.shape(k, "K", -1, kv * d) || !c.shape(v, "V", -1, kv * d)) return;
  if (k.s0 != 0 || v.s0 != 0) c.fail("K/V must start at seq 0");
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
    c.shape(op.out[i], i == 1 ? "dK" : "dV", -1, kv * d);
    c.same_rows(k, op.out[i], i == 1 ? "dK" : "dV");
  }
}

void check_norm_bwd(Checker& c, const Op& op, bool layer_norm) {
  const int n = op.attrs.chunks;
  if (n < 1 || n + 3 > kMaxIn) {
    c.fail(fmt::format("has chunks={}", n));
    return;
  }
  if (!c.arity(3 + n, 3 + n, 2, layer_norm ? 3 : 2)) return;
  const Region& x = op.in[0];
  const int64_t rows = x.rows(), h = x.cols();
  if (h % n != 0) c.fail(fmt::format("hidden {} is not divisible by chunks {}", h, n));
  c.shape(op.in[1], "stats", rows, 2);
  c.shape(op.in[2], "gamma", 1, h);
  for (int i = 0; i < n; ++i) c.shape(op.in[size_t(3 + i)], kInName[3 + i], rows, h / n);  // dy chunks
  c.shape(op.out[0], "dx", rows, h);
  for (int i = 1; i < op.n_out; ++i) c.shape(op.out[i], i == 1 ? "dgamma" : "dbeta", 1, h);
}

void check_shapes(Checker& c, const Op& op) {
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
    case OpCode::MatMulWgrad:
      if (!c.arity(2, 2, 1, 2) || !c.uniform(o0, "out[0]")) return;
      c.shape(i1, "in[1]", i0.rows(), -1);
      c.shape(o0, "out[0]", i0.cols(), i1.cols());
      if (op.n_out == 2) c.shape(op.out[1], "bias grad", 1, i1.cols());
      return;
    case OpCode::LayerNormFwd:
    case OpCode::RmsNormFwd: {
      const bool ln = op.code == OpCode::LayerNormFwd;
      if (!c.arity(ln ? 3 : 2, ln ? 3 : 2, 2, 2)) return;
      for (int i = 1; i < op.n_in; ++i) c.shape(op.in[i], i == 1 ? "gamma" : "beta", 1, i0.cols());
      c.shape(o0, "y", i0.rows(), i0.cols());
      c.shape(op.out[1], "stats", i0.rows(), 2);
      return;
    }
    case OpCode::LayerNormBwd:
    case OpCode::RmsNormBwd:
      return check_norm_bwd(c, op, op.code == OpCode::LayerNormBwd);
    case OpCode::GeluFwd:
    case OpCode::GeluBwd:
      if (!c.arity(op.code == OpCode::GeluFwd ? 1 : 2, op.code == OpCode::GeluFwd ? 1 : 2, 1, 1)) return;
      if (op.n_in == 2) c.shape(i1, "dy", i0.rows(), i0.cols());
      c.shape(o0, "out[0]", i0.rows(), i0.cols());
      return;
    case OpCode::SwigluFwd:
    case OpCode::SwigluBwd: {
      const bool fwd = op.code == OpCode::SwigluFwd;
      if (!c.arity(fwd ? 1 : 2, fwd ? 1 : 2, 1, 1)) return;
      if (i0.cols() % 2 != 0) c.fail("input [gate|up] has an odd number of columns");
      if (!fwd) c.shape(i1, "dy", i0.rows(), i0.cols() / 2);
      c.shape(o0, "out[0]", i0.rows(), fwd ? i0.cols() / 2 : i0.cols());
      return;
    }
    case OpCode::RopeFwd:
    case OpCode::RopeBwd:
      if (!c.arity(0, 1, 1, 1)) return;
      if (op.attrs.heads <= 0 || op.attrs.head_dim <= 0 || op.attrs.head_dim % 2 != 0 ||
          int64_t(op.attrs.heads) * op.attrs.head_dim > o0.cols()) {
        c.fail(fmt::format("has heads={} head_dim={} for {} columns (head_dim must be even)", op.attrs.heads,
                           op.attrs.head_dim, o0.cols()));
      }
      if (op.n_in == 1) {
        c.shape(i0, "in[0]", o0.rows(), o0.cols());
        c.same_rows(o0, i0, "in[0]");
      }
      return;
    case OpCode::AttnFwd:
      if (c.arity(3, 3, 2, 2)) check_attention(c, op, false);
      return;
    case OpCode::AttnBwd:
      if (c.arity(5, 5, 3, 3)) check_attention(c, op, true);
      return;
    case OpCode::ResidualAdd:
      if (!c.arity(2, 3, 1, 1)) return;
      c.shape(i1, "in[1]", i0.rows(), i0.cols());
      c.shape(o0, "out[0]", i0.rows(), i0.cols());
      if (op.n_in == 3) c.shape(op.in[2], "bias", 1, i0.cols());
      return;
    case OpCode::EmbeddingFwd:
    case OpCode::EmbeddingBwd: {
      const bool fwd = op.code == OpCode::EmbeddingFwd;
      if (!c.arity(2, fwd ? 3 : 2, 1, fwd ? 1 : 2)) return;
      const Region& rows = fwd ? o0 : i1;              // [B,S,h] activations
      const Region& table = fwd ? i1 : o0;             // [1,V,h]
      const Region* pos = fwd ? (op.n_in == 3 ? &op.in[2] : nullptr) : (op.n_out == 2 ? &op.out[1] : nullptr);
      c.shape(i0, "token ids", rows.rows(), 1);
      c.same_rows(rows, i0, "token ids");
      if (c.uniform(table, "table")) c.shape(table, "table", -1, rows.cols());
      if (pos && c.uniform(*pos, "positional table") && c.shape(*pos, "positional table", -1, rows.cols()) &&
          (pos->s0 > rows.s0 || pos->s1 < rows.s1)) {
        c.fail(fmt::format("positional table does not cover seq [{},{})", rows.s0, rows.s1));
      }
      return;
    }
    case OpCode::CrossEntropy:
      if (!c.arity(2, 2, 2, 2)) return;
      c.shape(i1, "targets", i0.rows(), 1);
      c.same_rows(i0, i1, "targets");
      c.shape(o0, "loss", 1, 1);
      c.shape(op.out[1], "dlogits", i0.rows(), i0.cols());
      return;
    case OpCode::AdamStep:
    case OpCode::SgdStep: {
      const int outs = op.code == OpCode::AdamStep ? 3 : 2;
      if (!c.arity(1, 1, outs, outs)) return;
      for (int i = 0; i < outs; ++i) {
        c.shape(op.out[size_t(i)], kOutName[i], i0.rows(), i0.cols());
        c.same_rows(i0, op.out[size_t(i)], kOutName[i]);
      }
      return;
    }
    case OpCode::AllReduce:
      c.arity(1, 1, 0, 1);
      return;
  }
  c.fail(fmt::format("has an unknown opcode {}", int(op.code)));
}

}  // namespace

std::string op_problem(const Schedule& s, const Op& op) {
  Checker c(s, op);
  if (op.n_in > kMaxIn || op.n_out > kMaxOut) return "has too many operands";
  for (int i = 0; i < op.n_in; ++i) c.bounds(op.in[size_t(i)], kInName[i]);
  for (int i = 0; i < op.n_out; ++i) c.bounds(op.out[size_t(i)], kOutName[i]);
  if (!c.problem().empty()) return c.problem();
  if (op.n_in == 0 && op.code != OpCode::RopeFwd && op.code != OpCode::RopeBwd) return "has no inputs";
  if (op.n_out == 0 && op.code != OpCode::AllReduce) return "has no outputs";
  check_shapes(c, op);
  return c.problem();
}

}  // namespace domino::cpu
