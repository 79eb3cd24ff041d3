// cold_cache.hpp: how a compute probe finds its data out of cache, as in a training step, where an op's
// inputs were written long before (other ops and the other rank ran in between): each copy of the op in the
// probe's chain gets its own buffer set, and the sets together exceed a cache, so that by the time a copy
// runs again its buffers have been evicted. A memory-bound probe exceeds the last-level cache (its data comes
// from memory); a CPU GEMM probe exceeds the core's own cache, the level below the last: between two
// uses of a weight in training, the other ops of the layer pass through that cache, while the shared last
// level may keep the model's working set.
#pragma once

#include <cstdint>
#include <string>

namespace domino::prof {

// The largest data cache of the machine in bytes (the last level), from a Linux sysfs cache folder
// (.../cpu0/cache: index*/level, size, type); 0 when it cannot be read.
int64_t last_level_cache_bytes(const std::string& cache_dir = "/sys/devices/system/cpu/cpu0/cache");

// The largest data cache of the level below the last (a core's L2 where L3 is the last); 0 when the folder
// names fewer than two levels or cannot be read.
int64_t core_cache_bytes(const std::string& cache_dir = "/sys/devices/system/cpu/cpu0/cache");

// The cache sizes the probes are sized against: the machine's, or an assumed 64 MiB (last level) and 2 MiB
// (a core's) where unknown.
int64_t probe_cache_bytes();
int64_t probe_core_cache_bytes();

// Buffer sets (chain copies) for a probe whose buffers take `probe_bytes`: enough that together they take
// at least twice `cache_bytes`, at most kMaxColdSets.
constexpr int kMaxColdSets = 16384;  // chain copies are told apart by a 16-bit op layer
int cold_buffer_sets(int64_t probe_bytes, int64_t cache_bytes);

}  // namespace domino::prof
