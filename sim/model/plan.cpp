// plan.cpp: named strategies, uniform plans, and the checks that a plan fits a model. Plan files are
// read and written in plan_io.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "sim/base/enum_names.hpp"
#include "sim/base/error.hpp"
#include "sim/base/yaml_reader.hpp"
#include "sim/model/plan_internal.hpp"

namespace domino {

const char* to_string(SplitDim d) { return d == SplitDim::Batch ? "batch" : "sequence"; }

constexpr std::array<const char*, 3> kOverlapModeNames = {"none", "intra", "inter"};
static_assert(size_t(OverlapMode::Inter) + 1 == kOverlapModeNames.size(), "one name per OverlapMode, in declaration order");
const char* to_string(OverlapMode o) { return enum_name(o, kOverlapModeNames); }

constexpr std::array<const char*, 2> kSliceOrderNames = {"deep", "deepspeed"};
static_assert(size_t(SliceOrder::DeepSpeed) + 1 == kSliceOrderNames.size(), "one name per SliceOrder, in declaration order");
const char* to_string(SliceOrder o) { return enum_name(o, kSliceOrderNames); }

std::vector<std::string> strategy_names() {
  return {"megatron-sync", "megatron-async",   "domino-ds",   "domino-deep",
          "no-comm",       "megatron-sp-sync", "megatron-sp", "megatron-sp-overlap"};
}

Plan make_uniform_plan(const ModelSpec& model, const BlockPlan& attn, const BlockPlan& mlp,
                       const std::string& strategy) {
  Plan p;
  p.model_name = model.name;
  p.model_fingerprint = model_fingerprint(model);
  p.tp = model.tp;
  p.strategy = strategy;
  p.recompute = model.training.recompute;
  p.layers.assign(size_t(std::max(model.layers, 0)), LayerPlan{attn, mlp});
  return p;
}

// "slices:P[xQ][:batch|sequence]": every block split into P row slices (and Q column chunks) with
// inter-layer and backward overlap, so sweeps and checks can name any uniform Domino plan on the command line.
static BlockPlan parse_slices_strategy(const std::string& name) {
  const std::string spec = name.substr(std::string("slices:").size());
  const size_t colon = spec.find(':');
  const std::string counts = spec.substr(0, colon);
  const std::string dim = colon == std::string::npos ? "batch" : spec.substr(colon + 1);
  BlockPlan b{SplitDim::Batch, 1, 1, OverlapMode::Inter, true};
  size_t used = 0;
  try {
    b.p = std::stoi(counts, &used);
    if (used < counts.size()) {
      if (counts[used] != 'x') throw std::invalid_argument(counts);
      const std::string q = counts.substr(used + 1);
      b.q = std::stoi(q, &used);
      if (used != q.size()) throw std::invalid_argument(q);
    }
  } catch (const std::exception&) {
    throw_bad_input(fmt::format("strategy '{}': expected slices:P[xQ][:batch|sequence], e.g. slices:4 or "
                                "slices:2x2:sequence", name));
  }
  if (dim != "batch" && dim != "sequence")
    throw_bad_input(fmt::format("strategy '{}': the split must be batch or sequence, not '{}'", name, dim));
  b.dim = dim == "batch" ? SplitDim::Batch : SplitDim::Sequence;
  return b;
}

// domino-ds and domino-deep halve the micro-batch; domino-ds also runs only what DeepSpeed's released Domino
// code supports (LayerNorm, GeLU, multi-head attention with learned positions). Each missing feature is
// named: running such a model in DeepSpeed's order would predict a system that does not exist.
static void refuse_two_batch_slices(const std::string& name, const ModelSpec& model) {
  std::vector<std::string> missing;
  if (name == "domino-ds") {
    if (model.norm == NormKind::RmsNorm) missing.push_back("RMSNorm (DeepSpeed's Domino has LayerNorm only)");
    if (model.activation != Activation::Gelu)
      missing.push_back(fmt::format("the {} activation (DeepSpeed's Domino has GeLU only)", to_string(model.activation)));
    if (model.kv_heads < model.heads) {
      missing.push_back(fmt::format("grouped-query attention (kv_heads {} < heads {}; DeepSpeed's Domino has "
                                    "multi-head attention only)",
                                    model.kv_heads, model.heads));
    }
    if (model.positions == Positions::Rotary)
      missing.push_back("rotary embeddings (DeepSpeed's Domino has learned positions only)");
    if (model.residual == Residual::Parallel)
      missing.push_back("parallel attention/MLP blocks (DeepSpeed's Domino has sequential blocks only)");
    if (model.norm_placement != NormPlacement::Pre)
      missing.push_back(fmt::format("{}-norm blocks (DeepSpeed's Domino has pre-norm blocks only)",
                                    to_string(model.norm_placement)));
    if (model.qk_norm != QkNorm::None) missing.push_back("QK-norm (DeepSpeed's Domino has none)");
    if (model.sliding_window > 0 && model.sliding_window < model.seq_len)
      missing.push_back("sliding-window attention (DeepSpeed's Domino has full causal attention only)");
  }
  if (model.micro_batch % 2 != 0) {
    missing.push_back(fmt::format("micro_batch {} (odd), which 2 batch slices cannot split (use an even "
                                  "micro-batch)",
                                  model.micro_batch));
  }
  if (missing.empty()) return;
  std::string list;
  for (const std::string& m : missing) list += (list.empty() ? "" : "; ") + m;
  const bool deep_runs = name == "domino-ds" && model.micro_batch % 2 == 0;
  throw_bad_input(fmt::format("strategy '{}' cannot run model '{}', which has {}{}", name, model.name, list,
                              deep_runs ? "; 'domino-deep' runs the same slicing in the project's order" : ""));
}

// "NAME+no-comm": NAME's slicing and order with its communication switched off, so that one launch can
// measure what a plan's communication costs it (its time over this comm-off run's) apart from what its
// slicing costs the compute (the comm-off run's time over no-comm's).
constexpr std::string_view kCommOffSuffix = "+no-comm";

Plan make_strategy_plan(const std::string& name, const ModelSpec& model) {
  if (name.size() > kCommOffSuffix.size() && name.ends_with(kCommOffSuffix)) {
    Plan comm_off = make_strategy_plan(name.substr(0, name.size() - kCommOffSuffix.size()), model);
    if (!comm_off.comm_enabled)
      throw_bad_input("strategy '" + name + "': the plan has no communication to switch off");
    comm_off.comm_enabled = false;
    comm_off.strategy = name;
    return comm_off;
  }
  BlockPlan b;  // batch, p = q = 1, every AllReduce blocks
  if (name.rfind("slices:", 0) == 0) {
    b = parse_slices_strategy(name);
    std::string key;
    const std::string why = detail::block_problem(b, model, &key);
    if (!why.empty()) throw_bad_input(fmt::format("strategy '{}': {}", name, why));
  } else if (name == "megatron-sync" || name == "no-comm" || name == "megatron-sp-sync") {
  } else if (name == "megatron-async" || name == "megatron-sp") {
    b.bwd_overlap = true;
  } else if (name == "megatron-sp-overlap") {
    // TransformerEngine's default pipelined split count (docs/plan-format.md, "Sequence parallelism").
    b.bwd_overlap = true, b.pipeline = 4;
  } else if (name == "domino-ds" || name == "domino-deep") {
    refuse_two_batch_slices(name, model);
    const SliceOrder order = name == "domino-ds" ? SliceOrder::DeepSpeed : SliceOrder::Deep;
    b = BlockPlan{SplitDim::Batch, 2, 1, OverlapMode::Inter, true, order};
  } else {
    std::string list;
    for (const auto& s : strategy_names()) list += (list.empty() ? "" : ", ") + s;
    const std::string near = closest_key(name, strategy_names());
    throw_bad_input("unknown strategy '" + name + "'" +
                    (near.empty() ? "" : " (did you mean '" + near + "'?)") + "; known strategies: " + list +
                    ", slices:P[xQ][:batch|sequence], and any of them +no-comm");
  }
  Plan p = make_uniform_plan(model, b, b, name);
  p.comm_enabled = name != "no-comm";
  p.sequence_parallel = name == "megatron-sp-sync" || name == "megatron-sp" || name == "megatron-sp-overlap";
  validate_plan(p, model);
  return p;
}

namespace detail {

std::string block_problem(const BlockPlan& bp, const ModelSpec& m, std::string* key) {
  key->assign(1, 'p');
  if (bp.p != 1 && bp.p != 2 && bp.p != 4 && bp.p != 8)
    return fmt::format("p={} is not one of 1, 2, 4, 8", bp.p);
  if (bp.dim == SplitDim::Batch && m.micro_batch % bp.p != 0) {
    return fmt::format("p={} does not divide micro_batch {} (split: batch)", bp.p, m.micro_batch);
  }
  if (bp.dim == SplitDim::Sequence && m.seq_len % bp.p != 0) {
    return fmt::format("p={} does not divide seq_len {} (split: sequence)", bp.p, m.seq_len);
  }
  key->assign(1, 'q');
  if (bp.q != 1 && bp.q != 2 && bp.q != 4) return fmt::format("q={} is not one of 1, 2, 4", bp.q);
  if (m.hidden % bp.q != 0) return fmt::format("q={} does not divide hidden {}", bp.q, m.hidden);
  if (bp.q > 1 && m.norm_placement != NormPlacement::Pre) {
    return fmt::format(
        "q={} splits the block output into column chunks, but model '{}' has {}-norm blocks "
        "(norm_placement: {}), whose norm after the AllReduce needs every column of a row; use q=1",
        bp.q, m.name, to_string(m.norm_placement), to_string(m.norm_placement));
  }
  key->assign("pipeline");
  if (bp.pipeline != 1 && bp.pipeline != 2 && bp.pipeline != 4 && bp.pipeline != 8)
    return fmt::format("pipeline={} is not one of 1, 2, 4, 8", bp.pipeline);
  if (bp.pipeline > 1 && (bp.p > 1 || bp.q > 1)) {
    return fmt::format(
        "pipeline={} chunks the GEMMs of an unsliced block; it is not built with p={} q={} "
        "(use p=1, q=1)",
        bp.pipeline, bp.p, bp.q);
  }
  key->assign("order");
  if (bp.order == SliceOrder::DeepSpeed && m.residual == Residual::Parallel) {
    return fmt::format(
        "order deepspeed cannot run model '{}': it has parallel attention/MLP blocks (residual: "
        "parallel) and DeepSpeed's Domino has sequential blocks only; use order: deep",
        m.name);
  }
  key->clear();
  return "";
}

// Full recomputation re-runs a layer's forward without its sequence-parallel gathers and without the post
// norms' saved sums; both are refused by name rather than predicted wrong.
std::string recompute_problem(const Plan& plan, const ModelSpec& m) {
  if (plan.recompute != Recompute::Full) return "";
  if (plan.sequence_parallel) {
    return "recompute: full is not built with sequence parallelism (sequence_parallel: true); use recompute: "
           "selective or none";
  }
  if (m.norm_placement != NormPlacement::Pre) {
    return fmt::format("recompute: full is not built for model '{}' with {}-norm blocks (norm_placement: {}); "
                       "use recompute: selective or none",
                       m.name, to_string(m.norm_placement), to_string(m.norm_placement));
  }
  return "";
}

std::string model_mismatch(const Plan& plan, const ModelSpec& m) {
  const std::string fp = model_fingerprint(m);
  if (plan.model_name == m.name && plan.tp == m.tp && plan.model_fingerprint == fp) return "";
  std::string what;
  if (plan.model_name != m.name) what = fmt::format("model '{}', not '{}'", plan.model_name, m.name);
  if (plan.tp != m.tp) what += fmt::format("{}tp {}, not tp {}", what.empty() ? "" : " and ", plan.tp, m.tp);
  if (what.empty()) {
    what = fmt::format("a model of another shape (fingerprint {}, this one {})", plan.model_fingerprint, fp);
  }
  return "the plan was made for " + what +
         "; make a plan for this model (domino-exec --force runs it anyway)";
}

}  // namespace detail

void validate_plan(const Plan& plan, const ModelSpec& model, bool force) {
  if (plan.format_version != 1) {
    throw_bad_input(
        fmt::format("plan format_version {} is not supported (this build reads 1)", plan.format_version));
  }
  if (int64_t(plan.layers.size()) != model.layers) {
    throw_bad_input(fmt::format("the plan has {} layer entries but model '{}' has {} layers",
                                plan.layers.size(), model.name, model.layers));
  }
  for (size_t l = 0; l < plan.layers.size(); ++l) {
    for (const bool attn : {true, false}) {
      std::string key;
      const BlockPlan& bp = attn ? plan.layers[l].attn : plan.layers[l].mlp;
      const std::string why = detail::block_problem(bp, model, &key);
      if (!why.empty()) {
        throw_bad_input(fmt::format("plan layer {} {}: {}", l, attn ? "attn" : "mlp", why));
      }
    }
  }
  if (const std::string why = detail::sp_problem(plan, model); !why.empty()) throw_bad_input("plan: " + why);
  if (const std::string why = detail::recompute_problem(plan, model); !why.empty()) throw_bad_input("plan: " + why);
  if (!force) {
    const std::string why = detail::model_mismatch(plan, model);
    if (!why.empty()) throw_bad_input(why);
  }
}

}  // namespace domino
