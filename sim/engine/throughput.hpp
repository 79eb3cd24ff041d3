// throughput.hpp: what a predicted iteration time means for training throughput: tokens per second per GPU
// and the model FLOPs utilisation (MFU), the figures that compare TP degrees (a larger TP group finishes an
// iteration sooner but spends more GPUs on it).
#pragma once

#include "sim/cost/profile.hpp"
#include "sim/model/model_spec.hpp"

namespace domino {

struct Throughput {
  double tokens_per_iteration = 0;       // micro_batch x seq_len: what one TP group trains per iteration
  double tokens_per_s_per_gpu = 0;       // tokens_per_iteration / (iteration seconds x tp)
  double model_flops_per_iteration = 0;  // the whole TP group's (see throughput())
  double mfu = 0;                        // NaN when the profile has no GEMM peak for the model's dtype
};

// Model FLOPs per iteration: ModelFacts::train_flops_per_token x tokens, i.e. forward and backward
// (3 x the forward) of every GEMM, 6 x weights x tokens, plus the attention scores and values,
// 12 x keys x attention width per token and layer, counted over all keys as Megatron-LM and PaLM count
// them. Recomputation is never counted (MFU convention). MFU = model FLOPs / (iteration time x tp x the
// profile's GEMM peak for the model's dtype). Data parallelism changes neither: each data-parallel rank
// trains its own micro-batch.
Throughput throughput(const ModelSpec& model, const Profile& profile, double iteration_us);

}  // namespace domino
