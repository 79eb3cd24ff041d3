// schedule_builder.cpp: build_schedule's driver, the op/region emission helpers, per-op costs, and the
// memory total. The stage order of each block lives in schedule_forward.cpp / schedule_backward.cpp.
#include <algorithm>
#include <array>

#include "sim/base/error.hpp"
#include "sim/ir/gemm_blocks.hpp"
#include "sim/ir/schedule_builder_internal.hpp"

namespace domino {
namespace detail {

Builder::Builder(const ModelSpec& m, const Plan& plan, const BuildOptions& options, Schedule& s)
    : m_(m), plan_(plan), options_(options), s_(s) {
  B_ = m.micro_batch;
  S_ = m.seq_len;
  h_ = m.hidden;
  a_l_ = m.heads_per_rank();
  kv_l_ = m.kv_heads_per_rank();
  d_ = m.head_dim();
  f_l_ = m.ffn_per_rank();
  V_ = m.vocab;
  V_l_ = m.vocab_per_rank();
  rotary_ = m.positions == Positions::Rotary;
  rms_ = m.norm == NormKind::RmsNorm;
  layernorm_ = !rms_;
  qk_norm_ = m.qk_norm != QkNorm::None;
  qkv_cols_ = (a_l_ + 2 * kv_l_) * d_;
  fc1_cols_ = m.gated() ? 2 * f_l_ : f_l_;
  parallel_ = m.residual == Residual::Parallel;
  shared_norm_ = m.shared_norm;
  pre_norm_ = m.norm_placement != NormPlacement::Post;
  post_norm_ = m.norm_placement != NormPlacement::Pre;
  sp_ = plan.sequence_parallel;
  sp_groups_ = sp_group_count(plan);
}

void Builder::run() {
  make_buffers();
  // Upper bound of the op count, so that emission never reallocates (Op is large).
  size_t n = 80 + size_t(m_.layers) * 16;
  for (const LayerPlan& lp : plan_.layers) {
    for (const BlockPlan* bp : {&lp.attn, &lp.mlp}) n += size_t(bp->p) * size_t(16 + 8 * bp->q);
  }
  if (plan_.recompute != Recompute::None) n *= 2;  // the recomputed forward ops
  s_.ops.reserve(sp_ ? 2 * n : n);  // sequence parallelism: an AllGather or ReduceScatter per collective
  forward();
  backward();
  if (options_.include_optimizer) optimizer();
}

Op& Builder::emit(int layer, Phase phase, Block block, const char* name, int slice, int chunk, OpCode code,
                  Stream stream) {
  Op& op = s_.ops.emplace_back();
  op.index = static_cast<int32_t>(s_.ops.size() - 1);
  op.layer = static_cast<int16_t>(layer);
  op.phase = phase;
  op.block = block;
  op.name = name;
  op.slice = static_cast<int8_t>(slice);
  op.chunk = static_cast<int8_t>(chunk);
  op.code = code;
  op.kind = kind_of(code);
  op.stream = stream;
  op.dtype = m_.dtype;
  if (stream == Stream::Compute && !blocking_.empty()) {
    op.deps = blocking_;
    blocking_.clear();
  }
  return op;
}

Region Builder::rows(int32_t buf, const Box& b, int64_t c0, int64_t c1) const {
  Region r;
  r.buffer = buf;
  r.b0 = b.b0, r.b1 = b.b1, r.s0 = b.s0, r.s1 = b.s1, r.c0 = c0, r.c1 = c1;
  return r;
}

Region Builder::rows(int32_t buf, const Box& b) const {
  return rows(buf, b, 0, s_.buffers[size_t(buf)].cols);
}

// Query positions [s0, s1) of a causal attention see keys [0, q]: sum over q of (q + 1) pairs per batch
// entry. The unsliced attention and every sequence slice are counted alike, so slicing along the sequence
// earns no discount; a tiled kernel's extra work on the diagonal tiles is left to the efficiency curve.
// With a sliding window a query sees min(q + 1, window) keys.
double causal_pairs(const Box& box, int64_t window) {
  const double queries = double(box.s1 - box.s0);
  if (window <= 0) return double(box.b1 - box.b0) * queries * double(box.s0 + box.s1 + 1) / 2.0;
  const int64_t split = std::clamp(window, box.s0, box.s1);  // queries below it see fewer than `window` keys
  const double short_rows = double(split - box.s0) * double(box.s0 + split + 1) / 2.0;
  return double(box.b1 - box.b0) * (short_rows + double(box.s1 - split) * double(window));
}

// Attention's three operands: the slice's query rows of Q and the key and value rows `keys` (those its
// causal queries see) of K and V; Q and K come from qk_buf's [q | k] columns, V from v_buf's last columns.
void Builder::qkv_operands(Op& op, int32_t qk_buf, int32_t v_buf, const Box& box, const Box& keys,
                           bool as_outputs) {
  const int64_t q_end = a_l_ * d_, k_end = (a_l_ + kv_l_) * d_;
  const Region q = rows(qk_buf, box, 0, q_end), k = rows(qk_buf, keys, q_end, k_end),
               v = rows(v_buf, keys, k_end, qkv_cols_);
  for (const Region& r : {q, k, v}) as_outputs ? out(op, r) : in(op, r);
}

Region Builder::whole(int32_t buf) const {
  const BufferDesc& d = s_.buffers[size_t(buf)];
  return rows(buf, Box{0, d.batch, 0, d.seq}, 0, d.cols);
}

Region Builder::weight(int32_t buf, int64_t r0, int64_t r1, int64_t c0, int64_t c1) const {
  return rows(buf, Box{0, 1, r0, r1}, c0, c1);
}

Box Builder::slice_box(const BlockPlan& bp, int slice) const {
  if (bp.dim == SplitDim::Batch) return Box{slice * B_ / bp.p, (slice + 1) * B_ / bp.p, 0, S_};
  return Box{0, B_, slice * S_ / bp.p, (slice + 1) * S_ / bp.p};
}

const BlockPlan& Builder::block_plan(int layer, Block block) const {
  const LayerPlan& lp = plan_.layers[size_t(layer)];
  return block == Block::Attn ? lp.attn : lp.mlp;
}

void Builder::flush_deferred_forward() {
  if (!deferred_.valid) return;
  deferred_.valid = false;
  residual_then_next_norm(deferred_.layer, deferred_.block, deferred_.slice);
}

void Builder::flush_deferred_backward() {
  if (!deferred_.valid) return;
  deferred_.valid = false;
  bwd_norm(deferred_.layer, deferred_.block, deferred_.slice);
}

bool Builder::next_block(int l, Block block, int* next_l, Block* next) const {
  if (block == Block::Attn) {
    *next_l = l, *next = Block::Mlp;
    return true;
  }
  *next_l = l + 1, *next = Block::Attn;
  return l + 1 < m_.layers;
}

bool Builder::prev_block(int l, Block block, int* prev_l, Block* prev) const {
  if (block == Block::Mlp) {
    *prev_l = l, *prev = Block::Attn;
    return true;
  }
  *prev_l = l - 1, *prev = Block::Mlp;
  return l > 0;
}

// Only when the next block's first slice shares no rows with this block's last one: that slice reads the
// rows the held-back add writes.
bool Builder::defers_residual(int l, Block block) const {
  const BlockPlan& bp = block_plan(l, block);
  int nl = 0;
  Block nb = Block::None;
  return bp.overlap == OverlapMode::Inter && next_block(l, block, &nl, &nb) &&
         !slice_box(bp, bp.p - 1).intersects(slice_box(block_plan(nl, nb), 0));
}

// The backward twin: the block processed next in backward (the previous one in forward order) starts with
// its last slice, which reads the residual gradient of the rows the held-back N'0 writes.
bool Builder::defers_norm_backward(int l, Block block) const {
  const BlockPlan& bp = block_plan(l, block);
  int pl = 0;
  Block pb = Block::None;
  if (bp.overlap != OverlapMode::Inter || !prev_block(l, block, &pl, &pb)) return false;
  const BlockPlan& prev = block_plan(pl, pb);
  return !slice_box(bp, 0).intersects(slice_box(prev, prev.p - 1));
}

// The rows must be the same, not merely covered: the norm reads exactly what the one add wrote.
bool Builder::early_norm(int l, Block block, int i) const {
  const BlockPlan& bp = block_plan(l, block);
  int pl = 0;
  Block pb = Block::None;
  if (bp.order != SliceOrder::DeepSpeed || i >= bp.p || !prev_block(l, block, &pl, &pb)) return false;
  const BlockPlan& prev = block_plan(pl, pb);
  return prev.order == SliceOrder::DeepSpeed && i < prev.p && slice_box(prev, i) == slice_box(bp, i);
}

// Rough FLOPs per output element of the memory-bound ops (they are timed by bytes; FLOPs only inform), by
// opcode in declaration order; GEMMs, attention and AllReduce count their FLOPs elsewhere (0 here).
constexpr std::array<double, 29> kFlopsPerElement = {
    0, 0, 0,        // MatMul, MatMulDgrad, MatMulWgrad
    8, 8, 14, 14,   // LayerNormFwd, RmsNormFwd, LayerNormBwd, RmsNormBwd
    12, 16, 8, 6,   // GeluFwd, GeluBwd, SwigluFwd, SwigluBwd
    3, 3, 0, 0,     // RopeFwd, RopeBwd, AttnFwd, AttnBwd
    2, 1, 1, 1,     // ResidualAdd, EmbeddingFwd, EmbeddingBwd, PositionAdd
    1, 3, 4,        // LogitMax, LogitSumExp, CrossEntropy
    0, 12, 4,       // AllReduce, AdamStep, SgdStep
    1, 1, 13, 10};  // ReluFwd, ReluBwd, GegluFwd (gelu and a product), GegluBwd (per dgate or dup element)
static_assert(size_t(OpCode::GegluBwd) + 1 == kFlopsPerElement.size(), "one figure per OpCode");
static double flops_per_element(OpCode c) { return kFlopsPerElement[size_t(c)]; }

void fill_costs(Schedule& s) {
  const int eb = dtype_bytes(s.model.dtype);
  const auto bytes_of = [&](const Region& r) {
    return double(r.elements()) * element_bytes(s.buffers[size_t(r.buffer)], eb);
  };
  for (Op& op : s.ops) {
    if (collective(op.kind)) {
      // The message: the full (gathered) region, as nccl-tests' "size" of the three collectives.
      const Region& full = op.code == OpCode::ReduceScatter ? op.in[0] : op.out[0];
      op.bytes = bytes_of(full);
      op.m = full.rows(), op.n = full.cols();
      continue;
    }
    double bytes = 0;
    for (int i = 0; i < op.n_in; ++i) bytes += bytes_of(op.in[size_t(i)]);
    for (int i = 0; i < op.n_out; ++i) bytes += bytes_of(op.out[size_t(i)]);
    // Partial rotary reads and writes only the rotated columns of each head.
    const double rotated = op.attrs.rotary_dims > 0 && (op.code == OpCode::RopeFwd || op.code == OpCode::RopeBwd)
                               ? double(op.attrs.rotary_dims) / double(op.attrs.head_dim)
                               : 1.0;
    op.bytes = bytes * rotated;
    if (op.kind == OpKind::Gemm) {
      op.flops = 2.0 * double(op.m) * double(op.n) * double(op.k);
      op.attrs.row_blocks = gemm_row_blocks(s, op);
    } else if (op.kind != OpKind::Attention) {
      // The loss ops' and the embedding's work scales with their input, not the small loss outputs.
      const Region& r = op.kind == OpKind::Loss           ? op.in[0]
                        : op.code == OpCode::EmbeddingBwd ? op.in[1]
                                                          : op.out[0];
      if (op.m == 0) op.m = r.rows(), op.n = r.cols();
      op.flops = flops_per_element(op.code) * double(r.elements()) * rotated;
    }
    if (op.kind == OpKind::Optimizer) cost_optimizer_step(s, op);
  }
}

}  // namespace detail

Schedule build_schedule(const ModelSpec& model, const Plan& plan, const BuildOptions& options) {
  validate_model(model);
  // Structure only: whether a plan made for another model may be used was decided when it was loaded.
  validate_plan(plan, model, /*force=*/true);
  Schedule s;
  s.model = model;
  s.plan = plan;
  detail::Builder b(s.model, s.plan, options, s);
  b.run();
  detail::fill_costs(s);
  detail::add_hazard_deps(s);
  detail::mark_fresh_rows(s);
  return s;
}

}  // namespace domino
