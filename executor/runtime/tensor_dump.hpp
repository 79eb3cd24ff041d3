// tensor_dump.hpp: float32 .npy files (--dump-tensors) and whole-rank buffer snapshots (--check).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/ir/schedule.hpp"

namespace domino {

// Writes a little-endian float32 C-order .npy file (format 1.0) through a temp file and a rename.
void write_npy(const std::string& path, const std::vector<int64_t>& shape, const std::vector<float>& data);
// Reads back what write_npy wrote (tests and tools); BadInput when it is not such a file.
std::vector<float> read_npy(const std::string& path, std::vector<int64_t>* shape = nullptr);
// The same for a file's bytes already in memory; `path` names it in messages.
std::vector<float> read_npy_bytes(const std::string& bytes, const std::string& path,
                                  std::vector<int64_t>* shape = nullptr);

// The .npy shape of a region: 2-D [rows, cols] for parameter-like buffers (batch 1, roles Param, Grad,
// OptState), else [batch, seq, cols].
std::vector<int64_t> npy_shape(const Schedule& schedule, const Region& region);

// Every buffer of one rank at one moment (the end of a --check iteration), by buffer index.
struct RankSnapshot {
  int rank = 0;
  float loss = 0;
  std::vector<std::vector<float>> buffers;  // empty for workspaces
};
void write_snapshot(const std::string& path, const RankSnapshot& snapshot);
RankSnapshot read_snapshot(const std::string& path);

}  // namespace domino
