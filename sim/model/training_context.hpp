// training_context.hpp: how a tensor-parallel group is trained beyond its own schedule: the data-parallel
// degree, whether the optimizer state is sharded over the data-parallel group (ZeRO-1, Megatron-LM's
// distributed optimizer) and activation recomputation. It changes the memory estimate and the optimizer
// step's share of the parameters, not the model; the recomputation mode passes to the plans made for the
// model (Plan::recompute), whose schedule holds the recomputed ops.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace domino {

enum class Recompute : uint8_t { None, Selective, Full };
const char* to_string(Recompute r);
// "none", "selective" or "full"; BadInput naming the flag otherwise.
Recompute parse_recompute(const std::string& text);
// The mode of that name; nullopt for any other text.
std::optional<Recompute> recompute_from_name(const std::string& text);

struct TrainingContext {
  int dp = 1;    // data-parallel degree: TP groups training replicas of the model on their own micro-batches
  int zero = 0;  // 1: fp32 master weights and optimizer moments sharded over the dp ranks (ZeRO-1)
  Recompute recompute = Recompute::None;
  // How many ranks share the optimizer state (the fp32 master weights and the moments): dp under ZeRO-1.
  int optimizer_shards() const { return zero == 1 ? dp : 1; }
};

// BadInput naming the flag: dp < 1, zero not 0 or 1.
void validate_training(const TrainingContext& t);

// "dp 8, zero 1, recompute none": for reports and provenance.
std::string training_summary(const TrainingContext& t);

}  // namespace domino
