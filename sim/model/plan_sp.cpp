// plan_sp.cpp: what sequence parallelism asks of a plan and its model: the group count of the sharded
// layout, and the features the schedule builder does not build under it (each refused by name).
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "sim/model/plan_internal.hpp"

namespace domino {

int sp_group_count(const Plan& plan) {
  int g = 1;
  for (const LayerPlan& lp : plan.layers) {
    for (const BlockPlan* bp : {&lp.attn, &lp.mlp}) {
      if (bp->dim == SplitDim::Sequence) g = std::max(g, bp->p);
      g = std::max(g, bp->pipeline);  // one group per GEMM chunk
    }
  }
  return g;
}

namespace detail {

std::string sp_problem(const Plan& plan, const ModelSpec& m) {
  if (!plan.sequence_parallel) {
    for (size_t l = 0; l < plan.layers.size(); ++l) {
      if (plan.layers[l].attn.pipeline > 1 || plan.layers[l].mlp.pipeline > 1)
        return fmt::format(
            "layer {}: pipeline > 1 chunks the AllGather and ReduceScatter of sequence "
            "parallelism: it needs sequence_parallel: true",
            l);
    }
    return "";
  }
  const std::string what = "sequence parallelism (sequence_parallel: true)";
  if (m.tp < 2)
    return fmt::format("{}: sequence parallelism needs tp >= 2 (model '{}' has tp {})", what, m.name, m.tp);
  if (m.residual == Residual::Parallel)
    return fmt::format(
        "{} is not built for parallel attention/MLP blocks (model '{}' has residual: parallel)", what,
        m.name);
  if (m.norm_placement != NormPlacement::Pre) {
    return fmt::format("{} is not built for {}-norm blocks (model '{}' has norm_placement: {})", what,
                       to_string(m.norm_placement), m.name, to_string(m.norm_placement));
  }
  const int64_t g = sp_group_count(plan);
  if (m.seq_len % (g * m.tp) != 0) {
    return fmt::format("{}: seq_len {} is not divisible by {} = {} sequence group(s) x tp {}", what,
                       m.seq_len, g * m.tp, g, m.tp);
  }
  for (size_t l = 0; l < plan.layers.size(); ++l) {
    for (const bool attn : {true, false}) {
      const BlockPlan& bp = attn ? plan.layers[l].attn : plan.layers[l].mlp;
      if (bp.order == SliceOrder::DeepSpeed) {
        return fmt::format(
            "{} is not built with the deepspeed slice order (layer {} {}: order: deepspeed); "
            "use order: deep",
            what, l, attn ? "attn" : "mlp");
      }
    }
  }
  return "";
}

}  // namespace detail
}  // namespace domino
