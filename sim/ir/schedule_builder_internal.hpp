// schedule_builder_internal.hpp: the builder's private state, shared by the schedule_*.cpp files that
// emit buffers, forward ops, backward ops and hazard dependencies. Not part of the public contract.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "sim/ir/partial_buffer_table.hpp"
#include "sim/ir/schedule.hpp"

namespace domino::detail {

// The rows (b, s) one slice of a block covers.
struct Box {
  int64_t b0 = 0, b1 = 0, s0 = 0, s1 = 0;
  int64_t rows() const { return (b1 - b0) * (s1 - s0); }
  bool intersects(const Box& o) const { return b0 < o.b1 && o.b0 < b1 && s0 < o.s1 && o.s0 < s1; }
  bool operator==(const Box&) const = default;
};

// Per-layer parameters, indexed the same way for Param, Grad and optimizer-state buffers.
// QnG, KnG: the QK-norm gains; P1/P2: the post norms of attention and MLP (norm_placement post or
// sandwich). Appended features.
enum LayerParam : int {
  QkvW, QkvB, ProjW, ProjB, Fc1W, Fc1B, Fc2W, Fc2B, N1G, N1B, N2G, N2B, QnG, KnG, P1G, P1B, P2G, P2B, kLayerParams
};
// Parameters outside the layers.
enum GlobalParam : int { TokEmb, PosEmb, HeadW, FinG, FinB, kGlobalParams };

// (query, key) pairs a causal attention computes for the query rows of `box` (all its batch entries);
// with a sliding window (window > 0) each query sees at most `window` keys.
double causal_pairs(const Box& box, int64_t window = 0);
// The first key position the query rows of `box` see: 0, or with a sliding window the first query's
// position - window + 1.
inline int64_t first_key(const Box& box, int64_t window) {
  return window > 0 ? std::max<int64_t>(0, box.s0 - window + 1) : 0;
}

struct LayerBuffers {
  std::array<int32_t, kLayerParams> param{}, grad{}, state1{}, state2{};  // -1 when absent
  int32_t x_in = -1, xn1 = -1, st1 = -1, qkv = -1, probs = -1, ctx = -1, x_mid = -1;
  int32_t xn2 = -1, st2 = -1, hpre = -1, act = -1, x_out = -1;
  // Attention features: with QK-norm the normalised (then rotated) [q | k] and the per-group statistics
  // ([q groups | k groups], two floats each); attention reads Q and K from qk, V from qkv.
  int32_t qk = -1, qk_stats = -1;
  // Post norms: output and stats per block (attention 0, MLP 1); their input is the block's own
  // per-layer forward partial-sum buffer (partial_buffer).
  std::array<int32_t, 2> post_y{-1, -1}, post_st{-1, -1};
};

struct GlobalBuffers {
  std::array<int32_t, kGlobalParams> param{}, grad{}, state1{}, state2{};
  int32_t tokens = -1, targets = -1, x0 = -1, xf = -1, stf = -1, logits = -1, dlogits = -1, loss = -1;
  // Vocab-parallel cross-entropy: per token the max logit [B,S,1], then (sum of exp, target logit) [B,S,2].
  int32_t loss_max = -1, loss_sums = -1;
  // Gradient workspaces shared by all layers: the backward pass runs them one after another on the
  // compute stream, so sharing costs no cross-stream waits.
  int32_t dresid = -1, dxf = -1, dctx = -1, dqkv = -1, dact = -1, dhpre = -1;
  int32_t dqk = -1;  // attention features: gradient of the normalised [q | k] (QK-norm only)
  int32_t dpost = -1;  // post norms: the gradient of the block's reduced output
  // Sequence parallelism: the full rows an AllGather fills or a ReduceScatter reads ([B, S, h] workspaces).
  // sp_x: the gathered norm output a column-parallel GEMM reads (forward, and again for its weight gradient),
  // also the embedding's partial sums and the gathered final norm output; sp_dy: the gathered residual
  // gradient the row-parallel backward reads, also the head's partial input gradient.
  int32_t sp_x = -1, sp_dy = -1;
};

// A residual add (forward) or norm backward (backward) held back to run after the next block's first
// slice: the inter-layer overlap.
// One linear layer's backward: what it reads and writes (schedule_backward.cpp). The row-parallel weight
// (fc2, proj) is [in_cols x h] and its input gradient goes to dx; the column-parallel one (fc1, qkv) is
// [h x out_cols] and its input gradient goes to partial-sum buffers that are all-reduced.
struct LinearBwd {
  const char* dgrad;      // op names
  const char* wgrad;
  int param;              // LayerParam of the weight; its bias is param + 1
  int32_t saved_input;    // the forward input of the layer
  int32_t dy;             // gradient of the layer's output
  int32_t dx;             // gradient of the layer's input (row-parallel; column-parallel: partial buffers)
  int64_t in_cols, out_cols;
};

struct Deferred {
  bool valid = false;
  int layer = 0;
  Block block = Block::Attn;
  int slice = 0;
};

class Builder {
 public:
  Builder(const ModelSpec& m, const Plan& plan, const BuildOptions& options, Schedule& s);
  void run();

 private:
  // schedule_buffers.cpp
  void make_buffers();
  void make_head_and_gradient_buffers();
  void add_layer_params(int l, const std::string& pre);
  // prefix + suffix where buffers keep names, else empty (the tuner's probes build thousands without).
  std::string kept_name(const std::string& prefix, const char* suffix) const {
    return options_.buffer_names ? prefix + suffix : std::string();
  }
  int32_t add_buffer(std::string name, BufferRole role, int layer, int64_t batch, int64_t seq, int64_t cols,
                     ParamKind param = ParamKind::None);
  void add_param(std::array<int32_t, kLayerParams>* p, std::array<int32_t, kLayerParams>* g,
                 std::array<int32_t, kLayerParams>* s1, std::array<int32_t, kLayerParams>* s2, int idx,
                 const std::string& prefix, int layer, int64_t rows, int64_t cols, ParamKind kind);
  // sharded: this rank's rows of the slice only (sequence parallelism: the ReduceScatter's output).
  int32_t partial_buffer(bool backward, Block block, int layer, const BlockPlan& bp, int slice, int chunk,
                         bool sharded = false);
  int32_t saved_partial(Block block, int layer, const BlockPlan& bp, int slice);  // post norms (q = 1)
  // A layer's activation `what` ("attn.qkv"): its own buffer "L3.attn.qkv", or, when the plan's recomputation
  // re-creates it in the backward, one of two buffers shared by layer parity ("rc.p1.attn.qkv").
  int32_t activation_buffer(int layer, const char* what, int64_t seq, int64_t cols);

  // schedule_builder.cpp: emission helpers and the stage order of one block.
  Op& emit(int layer, Phase phase, Block block, const char* name, int slice, int chunk, OpCode code,
           Stream stream = Stream::Compute);
  static void in(Op& op, const Region& r) { op.in[op.n_in++] = r; }
  static void out(Op& op, const Region& r) { op.out[op.n_out++] = r; }
  Region rows(int32_t buf, const Box& b, int64_t c0, int64_t c1) const;
  Region rows(int32_t buf, const Box& b) const;
  Region whole(int32_t buf) const;
  // Q and K from qk_buf, V from v_buf (the same buffer without QK-norm).
  void qkv_operands(Op& op, int32_t qk_buf, int32_t v_buf, const Box& box, const Box& keys, bool as_outputs);
  Region weight(int32_t buf, int64_t r0, int64_t r1, int64_t c0, int64_t c1) const;
  Box slice_box(const BlockPlan& bp, int slice) const;
  const BlockPlan& block_plan(int layer, Block block) const;
  bool chunked(const BlockPlan& bp) const { return bp.q > 1; }
  void flush_deferred_forward();
  void flush_deferred_backward();
  // The blocks in forward order (attn 0, mlp 0, attn 1, ...): the one after / before (l, block), false at
  // the ends (the head and the embedding are not blocks).
  bool next_block(int l, Block block, int* next_l, Block* next) const;
  bool prev_block(int l, Block block, int* prev_l, Block* prev) const;
  // Inter-layer overlap: the block's last residual add waits for the next block's first slice.
  bool defers_residual(int l, Block block) const;
  // Backward inter-layer overlap: the block's norm backward of slice 0 waits for the first slice of the
  // block processed after it (the previous one in forward order).
  bool defers_norm_backward(int l, Block block) const;
  // DeepSpeed order: the block's norm of slice i runs right after the previous block's residual add of the
  // same rows (both blocks in that order) instead of at the start of the block's own slice.
  bool early_norm(int l, Block block, int i) const;

  // schedule_forward.cpp
  void forward();
  void forward_block(int layer, Block block);
  void forward_block_deepspeed(int layer, Block block);
  // Buffers of a block's norm and the column-parallel GEMM after it (beta and bias: -1 when absent).
  struct NormColumnGemm {
    int32_t x, gamma, beta, xn, stats;
    const char* gemm;
    int32_t weight, bias, y;
    int64_t cols;
    int norm_param;  // LayerParam of the norm's gamma (its beta follows): whose gradients its backward writes
  };
  NormColumnGemm norm_column_gemm(int l, Block block) const;
  // A block's slice in three parts: the norm; the front (column-parallel GEMM, then attention or the
  // activation); the back (row-parallel GEMM and its AllReduce launches).
  void fwd_norm(int l, Block block, int i);
  void fwd_front(int l, Block block, int i);
  // The attention core AttnFwd of slice i (phase fwd_phase_).
  void emit_attn_core(int l, int i, const Box& box);
  // before_scatter (sequence parallelism): ops to issue after the row-parallel GEMM's first chunk and before
  // its first ReduceScatter (the next block's gather issued ahead: see forward_block_sp).
  void fwd_back(int l, Block block, int i, const std::function<void()>& before_scatter = {});
  // Attention features (schedule_attention.cpp): the sliding window of layer l (0: none or not shorter
  // than the sequence), the keys a slice's queries see, the QK-norm ops and the rope op.
  int64_t window_of(int l) const;
  Box key_box(int l, const Box& box) const;
  void qk_norm_forward(int l, int i, const Box& box);
  void qk_norm_backward(int l, int i, const Box& box);
  void emit_rope(int l, Phase phase, int i, const Box& box, int32_t buf);
  void fwd_row_parallel_gemm(int l, Block block, int i, const char* name, int32_t x, int32_t w, int64_t k,
                             const std::function<void()>& before_scatter);
  void fwd_residual(int l, Block block, int i);
  // R_i, then the next block's norm of the same rows when it runs early (DeepSpeed order).
  void residual_then_next_norm(int l, Block block, int i);

  // schedule_recompute.cpp (Plan::recompute): the layer's forward re-run at the start of its backward
  // (full), the attention core re-run before its backward (selective).
  void recompute_layer(int l);
  void recompute_attn_core(int l, int i, const Box& box);

  // schedule_head.cpp: the vocab-parallel ends of the model (embedding; final norm, head and loss).
  void embedding_forward();
  void head_forward(int32_t x_last);
  void head_backward(int32_t x_last);
  void embedding_backward();
  int32_t vocab_allreduce(Phase phase, Block block, const char* name, int32_t buf, ReduceOp reduce);

  // schedule_backward.cpp
  void backward();
  void backward_block(int layer, Block block);
  void backward_block_deepspeed(int layer, Block block);
  void bwd_row_parallel(int l, Block block, int i, const LinearBwd& lin);
  void bwd_column_parallel(int l, Block block, int i, const LinearBwd& lin);
  // The waits on a column-parallel layer's input-gradient AllReduces `ars`, as bp's overlap settings say.
  void after_input_grad_allreduces(Op& wgrad, const std::vector<int32_t>& ars, const BlockPlan& bp);
  // The backward of a slice's back (row-parallel dgrad and wgrad) and front (attention or activation
  // backward, column-parallel dgrad, its AllReduce launches, column-parallel wgrad).
  void bwd_back(int l, Block block, int i);
  void bwd_front(int l, Block block, int i);
  void bwd_norm(int l, Block block, int i);
  void optimizer();
  void optimizer_step(int layer, Block block, const char* name, int32_t param, int32_t grad, int32_t s1,
                      int32_t s2);

  const ModelSpec& m_;
  const Plan& plan_;
  // The phase forward emission writes: Forward, or Recompute while recompute_layer re-emits a layer.
  Phase fwd_phase_ = Phase::Forward;
  std::map<std::string, int32_t> recomputed_acts_;  // activation_buffer's shared buffers by name
  BuildOptions options_;
  Schedule& s_;

  int64_t B_, S_, h_, a_l_, kv_l_, d_, f_l_, V_, V_l_, qkv_cols_, fc1_cols_;
  bool rotary_, rms_, layernorm_;
  bool qk_norm_;  // attention features: QK-norm present (per head or full)

  std::vector<LayerBuffers> lb_;
  GlobalBuffers gb_;
  // Looked up per partial sum of every slice (partial_buffer, saved_partial).
  PartialBufferTable partials_;

  // Forward overlap=none: AllReduces the next compute op must wait for (the AllReduce "blocks").
  std::vector<int32_t> blocking_;
  Deferred deferred_;

  // Block structure: parallel residual, shared norm, post norms (docs/plan-format.md, "Block structure").
  bool parallel_ = false, shared_norm_ = false;
  bool pre_norm_ = true, post_norm_ = false;  // norm_placement: pre and sandwich / post and sandwich
  // A slice's post norm: its rows, its input (the saved reduced sums), stats buffer and gamma (LayerParam).
  struct PostNormOperands {
    Box box;
    int32_t sums, stats;
    int gamma;
  };
  PostNormOperands post_norm_operands(int l, Block block, int i);
  void fwd_post_norm(int l, Block block, int i);
  void bwd_post_norm(int l, Block block, int i);
  // Parallel blocks: the attention's residual adds not yet emitted (forward, inter-layer overlap).
  std::vector<int> pending_attn_adds_;
  void emit_pending_attn_adds(int l, const Box& box);
  // Parallel blocks: the MLP's norm backwards not yet emitted (slices of layer pending_layer_); they wait
  // until the attention's row-parallel backward has read d(x_out) of their rows.
  std::vector<int> pending_mlp_norms_;
  int pending_layer_ = -1;
  // Norm parameter gradients already written once this iteration: the first norm backward writes "=",
  // the others add (a shared norm has two writers per slice).
  std::set<int32_t> norm_grads_started_;
  void emit_pending_mlp_norms(int l, int lowest_attn_slice_done);

  // Sequence parallelism (schedule_sp.cpp, docs/plan-format.md "Sequence parallelism"): the residual stream,
  // norm inputs/outputs and stats, x0 and the final norm output hold S/tp rows per rank ([B, S/tp, cols]).
  bool sp_ = false;
  int64_t sp_groups_ = 1;  // g of the sharded layout (sp_group_count)
  // The rank's rows (in a sharded buffer) of the full rows `full` covers: whole groups, so [s0/tp, s1/tp).
  Box local(const Box& full) const;
  // A full box's group count (attrs.chunks of its AllGather / ReduceScatter).
  int16_t groups_in(const Box& full) const;
  // Emits an AllGather of sharded rows into full rows or a ReduceScatter of full rows into sharded rows on
  // the communication stream; -1 (nothing) when the plan has no communication.
  int32_t sp_collective(OpCode code, int layer, Phase phase, Block block, const char* name, int slice,
                        int chunk, const Region& from, const Region& to, int16_t groups);
  // pipeline: c (megatron-sp-overlap): the rows of GEMM chunk j of a slice's box (one group each).
  Box pipeline_chunk(const Box& box, int j, int chunks) const;
  // The gathers of slice i's rows of `sharded` into `full`: one, or one per pipeline chunk.
  void sp_gather_rows(int l, Phase phase, Block block, const char* name, int i, int32_t sharded,
                      int32_t full);
  // The column-parallel GEMM of slice i on `rows` (chunk -1: the whole slice).
  void fwd_column_gemm(int l, Block block, int i, const Box& rows, int chunk);
  // Row-parallel dgrad of a pipelined block: one GEMM per chunk of rows, each behind its gather.
  void bwd_row_dgrad_pipelined(int l, Block block, int i, const LinearBwd& lin);
  // Row-parallel GEMM of a pipelined block: chunk j's ReduceScatter runs behind chunk j+1's GEMM.
  void fwd_row_parallel_pipelined(int l, Block block, int i, const char* name, int32_t x, int32_t w,
                                  int64_t k);
  void forward_block_sp(int layer, Block block);
  void backward_block_sp(int layer, Block block);
  // N_i then the AllGather of its output into sp_x, once per slice (it may run ahead: prefetch).
  void fwd_norm_gather(int l, Block block, int i);
  // The AllGather of the residual gradient rows of slice i into sp_dy, once per slice.
  void bwd_gather_dy(int l, Block block, int i);
  // What the column-parallel weight gradient of slice i reads: the norm output, or under sequence parallelism
  // its rows gathered again into sp_x (after gathering ahead the residual gradient the next B' reads).
  int32_t bwd_column_input(int l, Block block, int i);
  // AllReduce of the norm parameters' gradients (partial sums of the rank's rows), emitted after the last
  // norm backward of the block writes them; the final norm's after the head's.
  void sp_norm_grad_allreduces(int layer, Block block, const std::array<int32_t, 2>& grads);
  std::set<std::array<int, 3>> sp_fwd_gathered_, sp_dy_gathered_;  // (layer, block, slice)
  std::map<std::array<int, 2>, int> sp_norm_bwds_;                 // norm backwards emitted per block
};

// Adds the data-hazard dependencies (cross-stream only) to every op, keeping the policy deps already
// present; leaves each Op::deps sorted and unique. schedule_hazards.cpp.
void add_hazard_deps(Schedule& s);

// Bytes, FLOPs and shapes of every op from its regions. schedule_costs.cpp.
void fill_costs(Schedule& s);
// Bytes per element of buffer `b` in a schedule of `model_bytes` per element: optimizer state is fp32 on
// every backend. The width fill_costs counts an op's bytes in.
inline int element_bytes(const BufferDesc& b, int model_bytes) {
  return b.role == BufferRole::OptState ? 4 : model_bytes;
}
// Op::fresh_bytes and fresh_from_bytes of every memory-bound compute op, from the ops' regions, streams and
// deps (after add_hazard_deps). schedule_fresh_rows.cpp.
void mark_fresh_rows(Schedule& s);
// The optimizer step's bytes in the training precision and its share under ZeRO-1 (optimizer_state.cpp).
void cost_optimizer_step(const Schedule& s, Op& op);

}  // namespace domino::detail
