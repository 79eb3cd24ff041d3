// probe_variants.hpp: one built probe schedule stands for a whole class of probes. Two block choices that
// differ only in the waits on their own AllReduces (forward / backward overlap none vs intra, backward
// overlap on or off) emit the same ops in the same order with the same buffers: the plan decides only two
// kinds of policy dependency, on top of the data-hazard ones (sim/ir/schedule_backward.cpp,
// schedule_forward.cpp, schedule_builder.cpp):
// - overlap none: each forward AllReduce of the block holds the next compute op in program order, and in
//   backward the AllReduces of a slice's column-parallel input gradient hold the next compute op after
//   that slice's column-parallel weight gradient;
// - no backward overlap: that weight gradient waits for the slice's AllReduces itself.
// The head's backward AllReduce follows the policy of the block it hands over to, the last MLP. So the
// schedule of any member of a class is the schedule of its representative (overlap intra, backward overlap
// on: no policy deps of its own) with those deps added. A test compares every patched schedule with
// build_schedule's, op for op. Schedules with other collectives (AllGather, ReduceScatter) are not
// covered: supported() says so, and the caller builds every probe instead.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "sim/ir/schedule.hpp"

namespace domino {

// The representative of a choice's class: overlap none becomes intra, backward overlap on. Inter-block
// overlap and every other field stay (they change which ops are emitted, or where).
BlockPlan policy_free(const BlockPlan& b);

class ProbeVariants {
 public:
  // `built`: build_schedule of a plan whose varying blocks (layer, Attn or Mlp) are at policy_free
  // choices; the schedule is kept and patched in place.
  ProbeVariants(Schedule built, const std::vector<std::pair<int, Block>>& varying);
  // Whether the rules above cover the schedule: AllReduce is its only collective.
  static bool supported(const Schedule& built);

  // The schedule of the plan with `layers` (which may differ from the built plan only in the policy of the
  // varying blocks): the built one with their policy deps added. Valid until the next call.
  const Schedule& with_layers(const std::vector<LayerPlan>& layers);
  // The built schedule (patched once with_layers is called).
  const Schedule& built() const { return s_; }
  // Calls add(op, dep) for every policy dep the plan with `layers` adds to the built schedule (an op may be
  // named with the same dep more than once): what the tuner adds to a simulation program of the built one.
  template <class AddDep>
  void for_each_policy_dep(const std::vector<LayerPlan>& layers, AddDep&& add) const;

 private:
  // The ops that gain deps under a policy, per varying block.
  struct BlockOps {
    int layer;
    Block block;
    std::vector<std::pair<int32_t, int32_t>> fwd_holds;  // (forward AllReduce, next compute op)
    struct Slice {
      std::vector<int32_t> ars;     // the column-parallel input gradient's AllReduces
      int32_t wgrad = -1;           // the weight gradient emitted right after them
      int32_t next = -1;            // the compute op after it (-1: none)
    };
    std::vector<Slice> bwd_slices;
  };
  void add_dep(int32_t op, int32_t dep);
  // The AllReduces of one varying block, among all of the schedule's: forward holds and backward slices (the
  // head's with the last MLP).
  BlockOps collect(int layer, Block block, const std::vector<int32_t>& all_reduces) const;
  int32_t next_compute(int32_t i) const;  // the first compute op after op i, -1 if none
  void save_built_deps();

  Schedule s_;
  std::vector<BlockOps> blocks_;
  std::vector<std::vector<int32_t>> built_deps_;  // per op that may gain deps (saved_slot_), its built deps
  std::vector<int32_t> saved_slot_;               // per op: index into built_deps_, -1 if it gains none
  std::vector<int32_t> touched_;                  // ops the last member changed
};

template <class AddDep>
void ProbeVariants::for_each_policy_dep(const std::vector<LayerPlan>& layers, AddDep&& add) const {
  for (const BlockOps& b : blocks_) {
    const LayerPlan& l = layers.at(size_t(b.layer));
    const BlockPlan& bp = b.block == Block::Attn ? l.attn : l.mlp;
    const bool holds = bp.overlap == OverlapMode::None;
    if (holds)
      for (const auto& [ar, next] : b.fwd_holds)
        if (next >= 0) add(next, ar);
    for (const BlockOps::Slice& sl : b.bwd_slices) {
      for (int32_t ar : sl.ars) {
        if (!bp.bwd_overlap) add(sl.wgrad, ar);
        if (holds && sl.next >= 0) add(sl.next, ar);
      }
    }
  }
}

}  // namespace domino
