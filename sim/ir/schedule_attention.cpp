// schedule_attention.cpp: the attention features the structural model fields ask for, emitted around the
// attention core by fwd_front / bwd_front: the sliding window (which keys a slice's queries see), QK-norm
// (a grouped norm of the queries and of the keys between the QKV GEMM and rope) and the rope op with its
// partial rotary width.
#include "sim/ir/schedule_builder_internal.hpp"

namespace domino::detail {

// A window at least as long as the sequence hides no key: the layer is then built exactly as without one.
int64_t Builder::window_of(int l) const {
  return m_.windowed(l) && m_.sliding_window < S_ ? m_.sliding_window : 0;
}

// The slice's queries see keys [first_key, last query position]: with a window, later sequence slices no
// longer read (nor, in the backward, write) the first slices' K/V rows.
Box Builder::key_box(int l, const Box& box) const {
  return Box{box.b0, box.b1, first_key(box, window_of(l)), box.s1};
}

namespace {

// One of the two QK-norm ops: its names, gain, columns of qkv / qk and columns of qk_stats (two per group).
struct QkPart {
  const char *fwd, *bwd;
  int param;
  int64_t c0, c1, st0, st1;
};

// Per head: one group of head_dim columns per head, gamma [1, head_dim]; full: one group over the whole
// projection (attrs.head_dim 0).
std::array<QkPart, 2> qk_parts(const ModelSpec& m, int64_t a_l, int64_t kv_l, int64_t d) {
  const bool per_head = m.qk_norm == QkNorm::PerHead;
  const int64_t gq = per_head ? a_l : 1, gk = per_head ? kv_l : 1;
  return {QkPart{"qnorm", "qnorm.bwd", QnG, 0, a_l * d, 0, 2 * gq},
          QkPart{"knorm", "knorm.bwd", KnG, a_l * d, (a_l + kv_l) * d, 2 * gq, 2 * (gq + gk)}};
}

int16_t qk_group_width(const ModelSpec& m, int64_t d) { return m.qk_norm == QkNorm::PerHead ? int16_t(d) : 0; }

}  // namespace

// qnorm and knorm: qkv's raw query and key columns -> qk, statistics per group into qk_stats.
void Builder::qk_norm_forward(int l, int i, const Box& box) {
  const LayerBuffers& b = lb_[size_t(l)];
  for (const QkPart& p : qk_parts(m_, a_l_, kv_l_, d_)) {
    Op& op = emit(l, fwd_phase_, Block::Attn, p.fwd, i, -1, OpCode::RmsNormFwd);
    in(op, rows(b.qkv, box, p.c0, p.c1));
    in(op, whole(b.param[size_t(p.param)]));
    out(op, rows(b.qk, box, p.c0, p.c1));
    out(op, rows(b.qk_stats, box, p.st0, p.st1));
    op.attrs.head_dim = qk_group_width(m_, d_);
  }
}

// The norms' backward from the gradient of qk (after rope's backward) into qkv's gradient columns; the
// gains' gradients add up over the slices (the last slice, processed first, writes them).
void Builder::qk_norm_backward(int l, int i, const Box& box) {
  const LayerBuffers& b = lb_[size_t(l)];
  const BlockPlan& bp = block_plan(l, Block::Attn);
  for (const QkPart& p : qk_parts(m_, a_l_, kv_l_, d_)) {
    Op& op = emit(l, Phase::Backward, Block::Attn, p.bwd, i, -1, OpCode::RmsNormBwd);
    in(op, rows(b.qkv, box, p.c0, p.c1));
    in(op, rows(b.qk_stats, box, p.st0, p.st1));
    in(op, whole(b.param[size_t(p.param)]));
    in(op, rows(gb_.dqk, box, p.c0, p.c1));
    out(op, rows(gb_.dqkv, box, p.c0, p.c1));
    out(op, whole(b.grad[size_t(p.param)]));
    op.attrs.head_dim = qk_group_width(m_, d_);
    op.attrs.accumulate_params = i != bp.p - 1;
  }
}

// Rope turns the queries and keys (columns [0, k_end) of buf) in place; partial rotary only the leading
// rotary_dims of each head.
void Builder::emit_rope(int l, Phase phase, int i, const Box& box, int32_t buf) {
  const bool fwd = phase != Phase::Backward;  // forward or recomputed forward
  const int64_t k_end = (a_l_ + kv_l_) * d_;
  Op& op = emit(l, phase, Block::Attn, fwd ? "rope" : "rope.bwd", i, -1, fwd ? OpCode::RopeFwd : OpCode::RopeBwd);
  in(op, rows(buf, box, 0, k_end));
  out(op, rows(buf, box, 0, k_end));
  op.attrs.heads = int16_t(a_l_ + kv_l_), op.attrs.head_dim = int16_t(d_);
  if (m_.rotary_dims > 0 && m_.rotary_dims < d_) op.attrs.rotary_dims = int16_t(m_.rotary_dims);
}

}  // namespace domino::detail
