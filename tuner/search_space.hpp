// search_space.hpp: the per-block choices the tuner considers (split dimension, p, q, overlap modes, order),
// with equivalent choices folded together and the baselines' own choices always included.
#pragma once

#include <string>
#include <vector>

#include "sim/model/model_spec.hpp"
#include "sim/model/plan.hpp"
#include "sim/ir/schedule.hpp"

namespace domino {

// What the user lets the tuner vary. The defaults are the full space of the issue.
struct SearchOptions {
  std::vector<SplitDim> splits = {SplitDim::Batch, SplitDim::Sequence};
  std::vector<int> p_values = {1, 2, 4, 8};
  std::vector<int> q_values = {1, 2, 4};
  std::vector<OverlapMode> overlaps = {OverlapMode::None, OverlapMode::Intra, OverlapMode::Inter};
  std::vector<bool> bwd_overlaps = {false, true};
  std::vector<SliceOrder> orders = {SliceOrder::Deep, SliceOrder::DeepSpeed};
  int max_p = 8;
  int max_q = 4;
  bool include_baselines = true;  // add megatron-sync/-async, domino-ds and domino-deep choices (never slower than them)
};

// Candidate choices per block type, in tie-break order (simpler choices first), no duplicates.
struct SearchSpace {
  // Every plan of this space runs under sequence parallelism (Plan::sequence_parallel): the choices then
  // include GEMM-level pipelining (BlockPlan::pipeline) and the pinned choices are megatron-sp's.
  bool sequence_parallel = false;
  std::vector<BlockPlan> attn;
  std::vector<BlockPlan> mlp;
  std::vector<std::string> notes;  // what was folded away or added, for the report
  std::vector<std::string>
      skipped;                     // choices the model's structure rules out, with why (describe prints them)
  std::vector<LayerPlan> pinned;   // the baselines' choices: never screened out
  const std::vector<BlockPlan>& of(Block b) const { return b == Block::Attn ? attn : mlp; }
  // Number of distinct per-block assignments of the whole model: (|attn| * |mlp|)^layers, as a
  // floating-point figure since it overflows any integer.
  double plans(int layers) const;
};

// The representative of a choice's equivalence class: p == 1 has no split dimension (batch) and no slice
// order (deep: one slice emits the same ops in both orders), and with a single slice and a single chunk
// intra-block overlap has nothing to overlap (none).
BlockPlan canonical(const BlockPlan& b);

// Orders choices: p, q, dim, overlap, bwd_overlap, order ascending (BlockPlan's own order is dim-first).
bool simpler(const BlockPlan& a, const BlockPlan& b);

// Builds the space for one model (tp included). BadInput when the options are malformed or when no
// slicing is possible at all (for instance micro-batch 1 with batch splits only).
// sequence_parallel: the space of plans under sequence parallelism (the caller checks that the model and
// the profile support it).
SearchSpace make_search_space(const ModelSpec& model, const SearchOptions& options, bool sequence_parallel = false);

// One-line description for reports and plan provenance ("attn 70 x mlp 70 choices: ...").
std::string describe(const SearchSpace& space, const SearchOptions& options);

// "seq p4 q2 inter+bwd" ("... ds" in the deepspeed order): a short label of one block's choice for tables.
std::string block_label(const BlockPlan& b);
std::string layer_label(const LayerPlan& l);

// Parses "batch,sequence" (CLI). BadInput on an unknown name.
std::vector<SplitDim> parse_splits(const std::string& text);
// Parses "deep,deepspeed" (CLI). BadInput on an unknown name.
std::vector<SliceOrder> parse_orders(const std::string& text);

}  // namespace domino
