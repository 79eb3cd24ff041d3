// param_init.hpp: the deterministic initial contents of every buffer, the same for every backend, plan and
// TP degree. Parameters are drawn per element of the FULL (unsharded) tensor from a counter-based hash of
// (seed, parameter kind, layer, full row, full col), and each rank takes its shard through shard_of(), so
// tp=1 and tp=N runs start from identical weights. Data: synthetic token sequences whose targets are the
// next token of a fixed recurrence, so the loss can fall.
#pragma once

#include <cstdint>

#include "sim/ir/schedule.hpp"

namespace domino {

enum class DataUse { None, Tokens, Targets };
// What a Data buffer feeds: token ids (embedding input) or target ids (cross-entropy input).
DataUse data_use(const Schedule& schedule, int32_t buffer);

// Writes the initial values of schedule.buffers[buffer] on `rank` into out (elements() floats, row-major).
// Params: weights and embeddings scale*U(-1,1) with std 0.02, norm gammas 1, betas and biases 0;
// Data: tokens / targets; everything else (gradients, optimizer states, activations) 0.
void initial_values(const Schedule& schedule, int32_t buffer, int rank, uint64_t seed, float* out);
// Whether initial_values fills the buffer with zeros (neither a parameter nor tokens or targets): a device
// backend then clears it in place instead of uploading zeros.
bool starts_at_zero(const Schedule& schedule, int32_t buffer);

// The synthetic language: token s+1 of every sequence is next_token(token s).
int64_t next_token(int64_t token, int64_t vocab);

}  // namespace domino
