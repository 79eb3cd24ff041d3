// schedule_buffers.cpp: every buffer one rank allocates for an iteration: parameters with their gradients
// and optimizer states, per-layer activations kept for backward, shared gradient workspaces, and the
// contiguous partial-sum buffers the AllReduces work on.
#include <fmt/format.h>

#include <string>
#include <string_view>

#include "sim/ir/schedule_builder_internal.hpp"

namespace domino::detail {

int32_t Builder::add_buffer(std::string name, BufferRole role, int layer, int64_t batch, int64_t seq,
                            int64_t cols, ParamKind param) {
  BufferDesc& b = s_.buffers.emplace_back();
  if (options_.buffer_names) b.name = std::move(name);
  b.role = role;
  b.param = param;
  b.layer = layer;
  b.batch = batch;
  b.seq = seq;
  b.cols = cols;
  return static_cast<int32_t>(s_.buffers.size() - 1);
}

// A parameter with its gradient and optimizer state(s): all share shape and ParamKind so that
// shard_of() maps any of them to the full tensor.
void Builder::add_param(std::array<int32_t, kLayerParams>* p, std::array<int32_t, kLayerParams>* g,
                        std::array<int32_t, kLayerParams>* s1, std::array<int32_t, kLayerParams>* s2, int idx,
                        const std::string& prefix, int layer, int64_t rows, int64_t cols, ParamKind kind) {
  (*p)[idx] = add_buffer(kept_name(prefix, ""), BufferRole::Param, layer, 1, rows, cols, kind);
  (*g)[idx] = add_buffer(kept_name(prefix, ".grad"), BufferRole::Grad, layer, 1, rows, cols, kind);
  if (!options_.include_optimizer) return;
  if (options_.optimizer == OptimizerKind::Adam) {
    (*s1)[idx] = add_buffer(kept_name(prefix, ".m"), BufferRole::OptState, layer, 1, rows, cols, kind);
    (*s2)[idx] = add_buffer(kept_name(prefix, ".v"), BufferRole::OptState, layer, 1, rows, cols, kind);
  } else {
    (*s1)[idx] = add_buffer(kept_name(prefix, ".mom"), BufferRole::OptState, layer, 1, rows, cols, kind);
  }
}

// Layer l's parameters, each with its gradient and optimizer states ("L3.attn.qkv.w", ".grad", ".m", ".v").
void Builder::add_layer_params(int l, const std::string& pre) {
  LayerBuffers& b = lb_[size_t(l)];
  auto* P = &b.param;
  auto* G = &b.grad;
  auto* S1 = &b.state1;
  auto* S2 = &b.state2;
  if (pre_norm_) {
    add_param(P, G, S1, S2, N1G, kept_name(pre, ".attn.norm.g"), l, 1, h_, ParamKind::AttnNormGamma);
    if (layernorm_) add_param(P, G, S1, S2, N1B, kept_name(pre, ".attn.norm.b"), l, 1, h_, ParamKind::AttnNormBeta);
  }
  add_param(P, G, S1, S2, QkvW, kept_name(pre, ".attn.qkv.w"), l, h_, qkv_cols_, ParamKind::QkvWeight);
  if (m_.qkv_bias) add_param(P, G, S1, S2, QkvB, kept_name(pre, ".attn.qkv.b"), l, 1, qkv_cols_, ParamKind::QkvBias);
  add_param(P, G, S1, S2, ProjW, kept_name(pre, ".attn.proj.w"), l, a_l_ * d_, h_, ParamKind::ProjWeight);
  if (m_.proj_bias) add_param(P, G, S1, S2, ProjB, kept_name(pre, ".attn.proj.b"), l, 1, h_, ParamKind::ProjBias);
  const bool mlp_norm = pre_norm_ && !shared_norm_;  // a shared norm is the attention's
  if (mlp_norm) {
    add_param(P, G, S1, S2, N2G, kept_name(pre, ".mlp.norm.g"), l, 1, h_, ParamKind::MlpNormGamma);
    if (layernorm_) add_param(P, G, S1, S2, N2B, kept_name(pre, ".mlp.norm.b"), l, 1, h_, ParamKind::MlpNormBeta);
  }
  add_param(P, G, S1, S2, Fc1W, kept_name(pre, ".mlp.fc1.w"), l, h_, fc1_cols_, ParamKind::Fc1Weight);
  if (m_.mlp_bias) add_param(P, G, S1, S2, Fc1B, kept_name(pre, ".mlp.fc1.b"), l, 1, fc1_cols_, ParamKind::Fc1Bias);
  add_param(P, G, S1, S2, Fc2W, kept_name(pre, ".mlp.fc2.w"), l, f_l_, h_, ParamKind::Fc2Weight);
  if (m_.mlp_bias) add_param(P, G, S1, S2, Fc2B, kept_name(pre, ".mlp.fc2.b"), l, 1, h_, ParamKind::Fc2Bias);
  // QK-norm gains: one per head shared by all heads, or (full, tp = 1) one over the whole projection.
  const bool per_head = m_.qk_norm == QkNorm::PerHead;
  if (qk_norm_) {
    add_param(P, G, S1, S2, QnG, kept_name(pre, ".attn.qnorm.g"), l, 1, per_head ? d_ : a_l_ * d_, ParamKind::QNormGamma);
    add_param(P, G, S1, S2, KnG, kept_name(pre, ".attn.knorm.g"), l, 1, per_head ? d_ : kv_l_ * d_, ParamKind::KNormGamma);
  }
  for (int k = 0; k < 2 && post_norm_; ++k) {
    const std::string name = pre + (k == 0 ? ".attn" : ".mlp") + ".post.norm";
    const int g = k == 0 ? P1G : P2G;
    const bool attn = k == 0;
    add_param(P, G, S1, S2, g, name + ".g", l, 1, h_,
              attn ? ParamKind::AttnPostNormGamma : ParamKind::MlpPostNormGamma);
    if (layernorm_) {
      add_param(P, G, S1, S2, g + 1, name + ".b", l, 1, h_,
                attn ? ParamKind::AttnPostNormBeta : ParamKind::MlpPostNormBeta);
    }
  }
}

void Builder::make_buffers() {
  const int L = m_.layers;
  s_.buffers.reserve(size_t(L) * 60 + 64);
  lb_.assign(size_t(L), LayerBuffers{});
  for (auto& l : lb_) l.param.fill(-1), l.grad.fill(-1), l.state1.fill(-1), l.state2.fill(-1);
  gb_.param.fill(-1), gb_.grad.fill(-1), gb_.state1.fill(-1), gb_.state2.fill(-1);

  // Global parameters: the token embedding and the head hold this rank's vocabulary shard (V_l_ ids);
  // the positional embedding and the final norm are replicated. A tied head has no weight of its own: it
  // reads the embedding's shard (schedule_head.cpp).
  using GP = std::array<int32_t, kLayerParams>;
  GP gp{}, gg{}, gs1{}, gs2{};
  gp.fill(-1), gg.fill(-1), gs1.fill(-1), gs2.fill(-1);
  add_param(&gp, &gg, &gs1, &gs2, TokEmb, "emb.tok", -1, V_l_, h_, ParamKind::TokenEmbedding);
  if (m_.positions == Positions::Learned) add_param(&gp, &gg, &gs1, &gs2, PosEmb, "emb.pos", -1, S_, h_, ParamKind::PositionEmbedding);
  add_param(&gp, &gg, &gs1, &gs2, FinG, "head.norm.g", -1, 1, h_, ParamKind::FinalNormGamma);
  if (layernorm_) add_param(&gp, &gg, &gs1, &gs2, FinB, "head.norm.b", -1, 1, h_, ParamKind::FinalNormBeta);
  if (!m_.tied_embeddings)
    add_param(&gp, &gg, &gs1, &gs2, HeadW, "head.w", -1, h_, V_l_, ParamKind::HeadWeight);
  for (int i = 0; i < kGlobalParams; ++i) {
    gb_.param[i] = gp[i], gb_.grad[i] = gg[i], gb_.state1[i] = gs1[i], gb_.state2[i] = gs2[i];
  }

  gb_.tokens = add_buffer("tokens", BufferRole::Data, -1, B_, S_, 1);
  gb_.targets = add_buffer("targets", BufferRole::Data, -1, B_, S_, 1);
  // Sequence parallelism: the regions between the tensor-parallel GEMMs hold this rank's S/tp rows.
  const int64_t S_sh = sp_ ? S_ / m_.tp : S_;
  gb_.x0 = add_buffer("x0", BufferRole::Activation, -1, B_, S_sh, h_);

  for (int l = 0; l < L; ++l) {
    LayerBuffers& b = lb_[size_t(l)];
    const std::string pre = options_.buffer_names ? fmt::format("L{}", l) : std::string();
    add_layer_params(l, pre);
    const bool mlp_norm = pre_norm_ && !shared_norm_;  // a shared norm is the attention's
    const bool per_head = m_.qk_norm == QkNorm::PerHead;

    const auto act = [&](const char* what, int64_t cols) { return activation_buffer(l, what, S_, cols); };
    const auto sharded_act = [&](const char* what, int64_t cols) { return activation_buffer(l, what, S_sh, cols); };
    b.x_in = l == 0 ? gb_.x0 : lb_[size_t(l - 1)].x_out;
    if (pre_norm_) b.xn1 = sharded_act("attn.norm.y", h_);
    if (pre_norm_) b.st1 = sharded_act("attn.norm.stats", 2);
    b.qkv = act("attn.qkv", qkv_cols_);
    if (qk_norm_) {
      b.qk = act("attn.qk", (a_l_ + kv_l_) * d_);
      b.qk_stats = act("attn.qk.stats", per_head ? 2 * (a_l_ + kv_l_) : 4);
    }
    b.probs = act("attn.probs", a_l_ * S_);
    b.ctx = act("attn.ctx", a_l_ * d_);
    b.x_mid = sharded_act("x_mid", h_);
    if (mlp_norm) b.xn2 = sharded_act("mlp.norm.y", h_);
    if (mlp_norm) b.st2 = sharded_act("mlp.norm.stats", 2);
    b.hpre = act("mlp.fc1.y", fc1_cols_);
    b.act = act("mlp.act", f_l_);
    // The layer's output is the next layer's input: kept under every recomputation mode.
    b.x_out = add_buffer(pre + ".x_out", BufferRole::Activation, l, B_, S_sh, h_);
    for (int k = 0; k < 2 && post_norm_; ++k) {
      b.post_y[size_t(k)] = act(k == 0 ? "attn.post.norm.y" : "mlp.post.norm.y", h_);
      b.post_st[size_t(k)] = act(k == 0 ? "attn.post.norm.stats" : "mlp.post.norm.stats", 2);
    }
  }

  make_head_and_gradient_buffers();
}

// Selective recomputation re-creates the attention probabilities; full every activation but the layer's
// output (the next layer's input). Two shared buffers (layer parity): layer l+1's forward never writes what
// layer l's forward wrote, and layer l's recomputation never what layer l+1's backward still reads.
int32_t Builder::activation_buffer(int layer, const char* what, int64_t seq, int64_t cols) {
  const std::string_view w(what);
  const bool recomputed = plan_.recompute == Recompute::Full ||
                          (plan_.recompute == Recompute::Selective && w == "attn.probs");
  if (!recomputed) {
    std::string own = options_.buffer_names ? fmt::format("L{}.{}", layer, w) : std::string();
    return add_buffer(std::move(own), BufferRole::Activation, layer, B_, seq, cols);
  }
  const std::string name = fmt::format("rc.p{}.{}", layer & 1, w);
  const auto it = recomputed_acts_.find(name);
  if (it != recomputed_acts_.end()) return it->second;
  const int32_t id = add_buffer(name, BufferRole::Activation, -1, B_, seq, cols);
  recomputed_acts_.emplace(name, id);
  return id;
}

// The head's activations and the gradients' workspaces, after every layer's buffers.
void Builder::make_head_and_gradient_buffers() {
  const int64_t S_sh = sp_ ? S_ / m_.tp : S_;
  gb_.xf = add_buffer("head.norm.y", BufferRole::Activation, -1, B_, S_sh, h_);
  gb_.stf = add_buffer("head.norm.stats", BufferRole::Activation, -1, B_, S_sh, 2);
  gb_.logits = add_buffer("logits", BufferRole::Activation, -1, B_, S_, V_l_);
  gb_.dlogits = add_buffer("logits.grad", BufferRole::Workspace, -1, B_, S_, V_l_);
  gb_.loss_max = add_buffer("loss.max", BufferRole::Activation, -1, B_, S_, 1);
  gb_.loss_sums = add_buffer("loss.sums", BufferRole::Activation, -1, B_, S_, 2);
  gb_.loss = add_buffer("loss", BufferRole::Activation, -1, 1, 1, 1);
  gb_.dresid = add_buffer("grad.resid", BufferRole::Workspace, -1, B_, S_sh, h_);
  gb_.dxf = add_buffer("grad.head.norm.y", BufferRole::Workspace, -1, B_, S_sh, h_);
  gb_.dctx = add_buffer("grad.attn.ctx", BufferRole::Workspace, -1, B_, S_, a_l_ * d_);
  gb_.dqkv = add_buffer("grad.attn.qkv", BufferRole::Workspace, -1, B_, S_, qkv_cols_);
  if (qk_norm_) gb_.dqk = add_buffer("grad.attn.qk", BufferRole::Workspace, -1, B_, S_, (a_l_ + kv_l_) * d_);
  gb_.dact = add_buffer("grad.mlp.act", BufferRole::Workspace, -1, B_, S_, f_l_);
  gb_.dhpre = add_buffer("grad.mlp.fc1.y", BufferRole::Workspace, -1, B_, S_, fc1_cols_);
  if (post_norm_) gb_.dpost = add_buffer("grad.post.norm.x", BufferRole::Workspace, -1, B_, S_, h_);
  if (sp_) {
    gb_.sp_x = add_buffer("sp.x.full", BufferRole::Workspace, -1, B_, S_, h_);
    gb_.sp_dy = add_buffer("sp.dy.full", BufferRole::Workspace, -1, B_, S_, h_);
  }
}

// Partial sums of one (slice, chunk) before their AllReduce: contiguous, so the AllReduce covers the whole
// buffer. Layers alternate between two sets (parity) so that an AllReduce still in flight from layer l
// never shares a buffer with layer l+1's writes; the shape is part of the key because layers may differ.
// Post norms keep the forward ones per layer: the reduced sums are the norm's input, saved for backward.
// Sharded ones (sequence parallelism: the rank's rows the ReduceScatter leaves) are named "sp." + the same.
int32_t Builder::partial_buffer(bool backward, Block block, int layer, const BlockPlan& bp, int slice,
                                int chunk, bool sharded) {
  const bool saved = post_norm_ && !backward;
  if (saved) return saved_partial(block, layer, bp, slice);
  const int parity = layer & 1;
  const uint64_t key =
      PartialBufferTable::key(backward, int(block), parity, int(bp.dim), bp.p, bp.q, slice, chunk, sharded);
  if (const int32_t found = partials_.find(key); found >= 0) return found;
  const bool batch = bp.dim == SplitDim::Batch;
  const std::string name =
      options_.buffer_names
          ? fmt::format("{}ps.{}.{}.p{}.{}{}x{}.s{}.c{}", sharded ? "sp." : "", backward ? "bwd" : "fwd",
                        to_string(block), parity, batch ? "batch" : "seq", bp.p, bp.q, slice, chunk)
          : std::string();
  const int64_t seq = (batch ? S_ : S_ / bp.p) / (sharded ? m_.tp : 1);
  const int32_t id = add_buffer(name, BufferRole::Workspace, -1, batch ? B_ / bp.p : B_, seq, h_ / bp.q);
  partials_.insert(key, id);
  return id;
}

int32_t Builder::saved_partial(Block block, int layer, const BlockPlan& bp, int slice) {
  const uint64_t key = PartialBufferTable::key(2, int(block), layer, int(bp.dim), bp.p, bp.q, slice, 0, false);
  if (const int32_t found = partials_.find(key); found >= 0) return found;
  const bool batch = bp.dim == SplitDim::Batch;
  const std::string name = options_.buffer_names
                               ? fmt::format("L{}.{}.post.norm.x.s{}", layer, to_string(block), slice)
                               : std::string();
  const int32_t id =
      add_buffer(name, BufferRole::Activation, layer, batch ? B_ / bp.p : B_, batch ? S_ : S_ / bp.p, h_);
  partials_.insert(key, id);
  return id;
}

}  // namespace domino::detail
