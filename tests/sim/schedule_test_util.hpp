// schedule_test_util.hpp: models and plans the schedule and plan tests share (constructed directly, so the
// tests do not depend on the model loader), and build_verified: every schedule a test builds passes the IR
// verifier.
#pragma once

#include <string>
#include <vector>

#include "sim/base/error.hpp"
#include "sim/model/plan.hpp"
#include "sim/ir/schedule.hpp"
#include "sim/ir/verify.hpp"

namespace domino::test {

// build_schedule, then verify_schedule (BadInput naming the op): the builder's every output obeys the
// contract the backends rely on. The builder itself does not verify: the tuner builds millions of schedules.
inline Schedule build_verified(const ModelSpec& model, const Plan& plan, const BuildOptions& options = {}) {
  Schedule s = build_schedule(model, plan, options);
  verify_schedule(s);
  return s;
}

inline ModelSpec tiny_gpt(int tp = 2) {
  ModelSpec m;
  m.name = "tiny-gpt";
  m.family = Family::Gpt;
  m.layers = 3;
  m.hidden = 32;
  m.heads = 4;
  m.kv_heads = 4;
  m.ffn_hidden = 64;
  m.activation = Activation::Gelu;
  m.norm = NormKind::LayerNorm;
  m.set_biases(true);
  m.vocab = 40;
  m.seq_len = 8;
  m.micro_batch = 8;
  m.dtype = DType::BF16;
  m.tp = tp;
  m.source = "<test>";
  return m;
}

// The model the plan files in tests/data/plans are written for: micro-batch 6, sequence 12 and hidden 42
// so that p = 4 / p = 8 / q = 4 do not divide them.
inline ModelSpec plan_files_model() {
  ModelSpec m = tiny_gpt(2);
  m.name = "tiny-bad";
  m.hidden = 42, m.heads = 6, m.kv_heads = 6, m.ffn_hidden = 84, m.micro_batch = 6, m.seq_len = 12;
  return m;
}

// Grouped-query attention; with tp 4 the 2 KV heads are replicated.
inline ModelSpec tiny_llama(int tp = 2) {
  ModelSpec m;
  m.name = "tiny-llama";
  m.family = Family::Llama, m.positions = Positions::Rotary;
  m.layers = 3;
  m.hidden = 32;
  m.heads = 4;
  m.kv_heads = 2;
  m.ffn_hidden = 48;
  m.activation = Activation::Swiglu;
  m.norm = NormKind::RmsNorm;
  m.set_biases(false);
  m.vocab = 40;
  m.seq_len = 8;
  m.micro_batch = 8;
  m.dtype = DType::FP16;
  m.tp = tp;
  m.source = "<test>";
  return m;
}

inline ModelSpec gpt3_13b() {
  ModelSpec m = tiny_gpt(8);
  m.name = "gpt3-13b";
  m.layers = 40, m.hidden = 5120, m.heads = 40, m.kv_heads = 40, m.ffn_hidden = 20480;
  m.vocab = 50257, m.seq_len = 1024, m.micro_batch = 16, m.dtype = DType::FP16;
  return m;
}

inline ModelSpec llama2_70b() {
  ModelSpec m = tiny_llama(8);
  m.name = "llama2-70b";
  m.layers = 80, m.hidden = 8192, m.heads = 64, m.kv_heads = 8, m.ffn_hidden = 28672;
  m.vocab = 32000, m.seq_len = 1024, m.micro_batch = 4, m.dtype = DType::BF16;
  return m;
}

struct NamedPlan {
  std::string name;
  Plan plan;
};

// The refusals plans_for expects of a named strategy: the two-batch-slice strategies on a model they cannot
// run (domino-ds on Llama features, either on an odd micro-batch), the sequence-parallel ones on a model
// sequence parallelism is not built for (tp 1, parallel blocks, post norms). Anything else is a failure.
inline bool expected_strategy_refusal(const std::string& strategy, const Error& e) {
  const bool two_batch_slices = strategy == "domino-ds" || strategy == "domino-deep";
  const std::string what = e.what();
  if (strategy.rfind("megatron-sp", 0) == 0)
    return e.kind() == ErrorKind::BadInput && what.find("sequence parallelism") != std::string::npos;
  return two_batch_slices && e.kind() == ErrorKind::BadInput &&
         what.find("strategy '" + strategy + "' cannot run model") != std::string::npos;
}

// The named strategies the model can run (domino-ds refuses Llama models) plus custom plans covering p in
// {1,2,4}, q in {1,2,4}, both split dimensions, every overlap mode, both slice orders, and per-layer
// mixtures (of orders too).
inline std::vector<NamedPlan> plans_for(const ModelSpec& m) {
  std::vector<NamedPlan> out;
  for (const auto& s : strategy_names()) {
    try {
      out.push_back({s, make_strategy_plan(s, m)});
    } catch (const Error& e) {
      if (!expected_strategy_refusal(s, e)) throw;
    }
  }
  const auto uni = [&](const std::string& name, BlockPlan a, BlockPlan b) {
    out.push_back({name, make_uniform_plan(m, a, b, "custom")});
  };
  using S = SplitDim;
  using O = OverlapMode;
  uni("batch-p4-q1-inter", {S::Batch, 4, 1, O::Inter, true}, {S::Batch, 4, 1, O::Inter, true});
  uni("batch-p2-q2-intra", {S::Batch, 2, 2, O::Intra, false}, {S::Batch, 2, 2, O::Intra, true});
  uni("batch-p4-q4-inter", {S::Batch, 4, 4, O::Inter, true}, {S::Batch, 4, 4, O::Inter, false});
  uni("seq-p2-q1-inter", {S::Sequence, 2, 1, O::Inter, true}, {S::Sequence, 2, 1, O::Inter, true});
  uni("seq-p4-q2-inter", {S::Sequence, 4, 2, O::Inter, true}, {S::Sequence, 4, 2, O::Inter, true});
  uni("seq-p4-q4-none", {S::Sequence, 4, 4, O::None, false}, {S::Sequence, 4, 4, O::None, true});
  uni("p1-q4-intra", {S::Batch, 1, 4, O::Intra, true}, {S::Batch, 1, 4, O::Inter, true});
  uni("attn-seq-mlp-batch", {S::Sequence, 2, 2, O::Inter, true}, {S::Batch, 4, 1, O::Inter, true});
  Plan mixed = make_uniform_plan(m, {}, {}, "custom");
  for (size_t l = 0; l < mixed.layers.size(); ++l) {
    const int p = 1 << (l % 3), q = 1 << ((l + 1) % 3);
    const S dim = l % 2 ? S::Sequence : S::Batch;
    mixed.layers[l].attn = {dim, p, q, O::Inter, l % 2 == 0};
    mixed.layers[l].mlp = {S::Batch, 2 * p > 4 ? 1 : 2 * p, 1, l % 2 ? O::Intra : O::Inter, true};
  }
  out.push_back({"mixed-per-layer", mixed});
  const SliceOrder DS = SliceOrder::DeepSpeed;
  uni("ds-batch-p4-q2-inter", {S::Batch, 4, 2, O::Inter, true, DS}, {S::Batch, 4, 2, O::Inter, true, DS});
  uni("ds-seq-p2-q1-inter", {S::Sequence, 2, 1, O::Inter, true, DS}, {S::Sequence, 2, 1, O::Inter, false, DS});
  uni("ds-seq-p4-q1-intra", {S::Sequence, 4, 1, O::Intra, true, DS}, {S::Sequence, 4, 4, O::None, false, DS});
  uni("ds-batch-p2-q2-none", {S::Batch, 2, 2, O::None, false, DS}, {S::Batch, 4, 1, O::Inter, true, DS});
  uni("ds-attn-deep-mlp", {S::Batch, 2, 1, O::Inter, true, DS}, {S::Batch, 2, 1, O::Inter, true});
  uni("deep-attn-ds-mlp", {S::Batch, 2, 1, O::Inter, true}, {S::Batch, 2, 4, O::Inter, true, DS});
  Plan orders = make_uniform_plan(m, {}, {}, "custom");
  for (size_t l = 0; l < orders.layers.size(); ++l) {
    const int p = 2 << (l % 2);
    const S dim = l == 1 ? S::Sequence : S::Batch;
    orders.layers[l].attn = {dim, p, 1, O::Inter, true, l == 2 ? SliceOrder::Deep : DS};
    orders.layers[l].mlp = {S::Batch, p, l % 2 ? 2 : 1, O::Inter, true, l == 0 ? SliceOrder::Deep : DS};
  }
  out.push_back({"mixed-orders", orders});
  Plan nocomm_sliced =
      make_uniform_plan(m, {S::Batch, 2, 2, O::Inter, true}, {S::Sequence, 2, 2, O::Inter, true}, "custom");
  nocomm_sliced.comm_enabled = false;
  out.push_back({"no-comm-sliced", nocomm_sliced});
  return out;
}

// Sequence-parallel variants ("sp/<name>") of plans_for's plans with communication, those the model builds
// under sequence parallelism (the deepspeed order is refused; so are tp 1 and some block structures).
inline std::vector<NamedPlan> sp_plans_for(const ModelSpec& m) {
  std::vector<NamedPlan> out;
  for (NamedPlan np : plans_for(m)) {
    if (!np.plan.comm_enabled || np.plan.sequence_parallel) continue;
    np.plan.sequence_parallel = true;
    try {
      validate_plan(np.plan, m, /*force=*/true);
    } catch (const Error& e) {
      if (std::string(e.what()).find("sequence parallelism") == std::string::npos) throw;
      continue;
    }
    out.push_back({"sp/" + np.name, np.plan});
  }
  return out;
}

inline std::vector<ModelSpec> small_models() {
  return {tiny_gpt(2), tiny_llama(2), tiny_llama(4), tiny_gpt(1)};
}

}  // namespace domino::test
