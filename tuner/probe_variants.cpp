// probe_variants.cpp: the policy deps of a class member added to its representative's schedule; see
// probe_variants.hpp.
#include "tuner/probe_variants.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "sim/base/error.hpp"

namespace domino {

BlockPlan policy_free(const BlockPlan& b) {
  BlockPlan r = b;
  if (r.overlap == OverlapMode::None) r.overlap = OverlapMode::Intra;
  r.bwd_overlap = true;
  return r;
}

bool ProbeVariants::supported(const Schedule& built) {
  // Recomputed AllReduces (full recomputation) follow their block's overlap too, which the variants do not vary.
  return std::none_of(built.ops.begin(), built.ops.end(), [](const Op& op) {
    return collective(op.kind) && (op.code != OpCode::AllReduce || op.phase == Phase::Recompute);
  });
}

int32_t ProbeVariants::next_compute(int32_t i) const {
  const int32_t n = int32_t(s_.ops.size());
  for (int32_t j = i + 1; j < n; ++j)
    if (s_.ops[size_t(j)].stream == Stream::Compute) return j;
  return -1;
}

ProbeVariants::BlockOps ProbeVariants::collect(int layer, Block block, const std::vector<int32_t>& all_reduces) const {
  const std::vector<Op>& ops = s_.ops;
  BlockOps b{layer, block, {}, {}};
  // Backward AllReduces by slice (-1: the head's), in order of slice; a block has few slices.
  std::vector<std::pair<int, BlockOps::Slice>> slices;
  auto slice_of = [&](int slice) -> BlockOps::Slice& {
    for (auto& [id, sl] : slices)
      if (id == slice) return sl;
    return slices.emplace_back(slice, BlockOps::Slice{}).second;
  };
  const bool hands_over = block == Block::Mlp && layer == s_.model.layers - 1;
  for (const int32_t i : all_reduces) {
    const Op& op = ops[size_t(i)];
    if (hands_over && op.block == Block::Head && op.phase == Phase::Backward) {
      slice_of(-1).ars.push_back(op.index);
    } else if (op.layer == layer && op.block == block && op.phase == Phase::Forward) {
      b.fwd_holds.emplace_back(op.index, next_compute(op.index));
    } else if (op.layer == layer && op.block == block && op.phase == Phase::Backward) {
      slice_of(op.slice).ars.push_back(op.index);
    }
  }
  std::sort(slices.begin(), slices.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  b.bwd_slices.reserve(slices.size());
  for (auto& [slice, sl] : slices) {
    sl.wgrad = next_compute(sl.ars.back());
    if (sl.wgrad < 0 || !std::string_view(ops[size_t(sl.wgrad)].name).ends_with("wgrad"))
      throw_runtime(fmt::format("probe variants: the op after the input-gradient AllReduces of layer {} {} slice {} "
                                "is not a weight gradient (the schedule builder changed)",
                                layer, to_string(block), slice));
    sl.next = next_compute(sl.wgrad);
    b.bwd_slices.push_back(std::move(sl));
  }
  return b;
}

ProbeVariants::ProbeVariants(Schedule built, const std::vector<std::pair<int, Block>>& varying)
    : s_(std::move(built)) {
  std::vector<int32_t> all_reduces;
  for (const Op& op : s_.ops)
    if (op.code == OpCode::AllReduce) all_reduces.push_back(op.index);
  for (const auto& [layer, block] : varying) blocks_.push_back(collect(layer, block, all_reduces));
}

// The built deps of every op a member may change, kept on the first with_layers (before any patch): a caller
// that only asks for_each_policy_dep never pays for the copies.
void ProbeVariants::save_built_deps() {
  saved_slot_.assign(s_.ops.size(), -1);
  auto may_gain = [&](int32_t i) {
    if (i < 0 || saved_slot_[size_t(i)] >= 0) return;
    saved_slot_[size_t(i)] = int32_t(built_deps_.size());
    built_deps_.push_back(s_.ops[size_t(i)].deps);
  };
  for (const BlockOps& b : blocks_) {
    for (const auto& [ar, next] : b.fwd_holds) may_gain(next);
    for (const BlockOps::Slice& sl : b.bwd_slices) may_gain(sl.wgrad), may_gain(sl.next);
  }
}

void ProbeVariants::add_dep(int32_t op, int32_t dep) {
  s_.ops[size_t(op)].deps.push_back(dep);
  touched_.push_back(op);
}

const Schedule& ProbeVariants::with_layers(const std::vector<LayerPlan>& layers) {
  if (saved_slot_.empty()) save_built_deps();
  for (int32_t i : touched_) s_.ops[size_t(i)].deps = built_deps_[size_t(saved_slot_[size_t(i)])];
  touched_.clear();
  for_each_policy_dep(layers, [this](int32_t op, int32_t dep) { add_dep(op, dep); });
  std::sort(touched_.begin(), touched_.end());
  touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
  for (int32_t i : touched_) {
    std::vector<int32_t>& deps = s_.ops[size_t(i)].deps;
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  }
  s_.plan.layers = layers;
  return s_;
}

}  // namespace domino
