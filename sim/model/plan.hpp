// plan.hpp: how each layer is sliced and overlapped; named strategies; plan files (docs/plan-format.md).
#pragma once

#include <compare>
#include <map>
#include <string>
#include <vector>

#include "sim/model/model_spec.hpp"

namespace domino {

enum class SplitDim { Batch, Sequence };
// None: every AllReduce blocks. Intra: a slice's AllReduce overlaps the next slice's compute; the block
// ends when all are done. Inter: additionally the last AllReduce crosses into the next block/layer.
enum class OverlapMode { None, Intra, Inter };

// The program order of a block's slices (docs/plan-format.md). Deep: the project's pipeline, where slice
// i's AllReduce runs behind slice i+1's whole compute up to its own AllReduce launch. DeepSpeed: the order
// of DeepSpeed's released Domino code, where slice i's AllReduce runs behind slice i+1's first GEMM and
// attention (or activation) only, and the next block's norm follows each residual add.
enum class SliceOrder { Deep, DeepSpeed };

const char* to_string(SplitDim d);
const char* to_string(OverlapMode o);
const char* to_string(SliceOrder o);

// One block (attention or MLP) of one layer.
struct BlockPlan {
  SplitDim dim = SplitDim::Batch;
  int p = 1;  // row slices of the block input along dim: 1, 2, 4, 8
  int q = 1;  // column chunks of the row-parallel weight's output: 1, 2, 4
  OverlapMode overlap = OverlapMode::None;
  bool bwd_overlap = false;  // input-gradient AllReduce runs behind the weight-gradient GEMM
  SliceOrder order = SliceOrder::Deep;
  // Sequence parallelism with p = 1 only: the column-parallel GEMM's AllGather and the row-parallel GEMM's
  // ReduceScatter pipelined in this many chunks along the sequence (1, 2, 4, 8), each GEMM chunk overlapping
  // the next chunk's transfer; attention and the activation stay whole (megatron-sp-overlap).
  int pipeline = 1;
  auto operator<=>(const BlockPlan&) const = default;
};

struct LayerPlan {
  BlockPlan attn;
  BlockPlan mlp;
  auto operator<=>(const LayerPlan&) const = default;
};

struct Plan {
  int format_version = 1;
  std::string model_name;
  std::string model_fingerprint;
  int tp = 1;
  std::string profile;           // profile it was tuned on ("" when none)
  std::string strategy;          // named strategy it came from, or "tuned" / "custom"
  bool comm_enabled = true;      // false only for the no-comm bound
  // Megatron's sequence parallelism, model-wide: the regions between the tensor-parallel GEMMs (norms,
  // residual adds, embedding output, final norm) hold S/tp rows per rank, each AllReduce becomes a
  // ReduceScatter after the row-parallel GEMM and an AllGather before the next column-parallel GEMM.
  bool sequence_parallel = false;
  // Activation recomputation (docs/plan-format.md, "Activation recomputation"): selective re-runs each
  // attention core before its backward instead of keeping its probabilities; full keeps only each layer's
  // input and re-runs the layer's forward at the start of its backward. Plans made for a model take its
  // training context's mode (make_uniform_plan).
  Recompute recompute = Recompute::None;
  std::vector<LayerPlan> layers; // exactly one entry per model layer (ranges are expanded on load)
  // Free-form provenance the tuner records (tuner version, search space, predicted figures), kept as
  // ordered key/value text so that plans stay byte-identical for identical inputs.
  std::map<std::string, std::string> provenance;
};

// megatron-sync, megatron-async, domino-ds, domino-deep, no-comm, megatron-sp-sync, megatron-sp,
// megatron-sp-overlap
std::vector<std::string> strategy_names();
// Expands a named strategy (NAME+no-comm: NAME with its communication off); BadInput for an unknown name
// (closest suggested) or one the model cannot run.
Plan make_strategy_plan(const std::string& name, const ModelSpec& model);
// Uniform plan: every layer gets the same blocks; recompute is the model's training context's.
Plan make_uniform_plan(const ModelSpec& model, const BlockPlan& attn, const BlockPlan& mlp, const std::string& strategy);

// The group count g of a sequence-parallel plan's sharded layout (SpLayout in sim/ir/schedule.hpp): the
// largest sequence-slice count p of any block, 1 when no block slices the sequence (and for plans without
// sequence parallelism).
int sp_group_count(const Plan& plan);

// Throws BadInput when the plan does not fit the model (p not dividing the split dimension, q not
// dividing the output width, wrong layer count, other model/tp unless force).
void validate_plan(const Plan& plan, const ModelSpec& model, bool force = false);

Plan load_plan(const std::string& path, const ModelSpec& model, bool force = false);
Plan load_plan_string(const std::string& yaml, const std::string& name, const ModelSpec& model, bool force = false);
// Writes to a temporary file and renames; layers with identical plans are written as ranges.
void save_plan(const Plan& plan, const std::string& path);
std::string plan_to_yaml(const Plan& plan);

}  // namespace domino
