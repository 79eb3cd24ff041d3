// cold_cache.hpp: how a memory-bound probe finds its data out of cache, as in a training step, where an
// op's inputs were written long before (other ops and the other rank ran in between): each copy of the op in
// the probe's chain gets its own buffer set, and the sets together exceed the last-level cache, so that by
// the time a copy runs again its buffers have been evicted.
#pragma once

#include <cstdint>
#include <string>

namespace domino::prof {

// The largest data cache of the machine in bytes (the last level), from a Linux sysfs cache folder
// (.../cpu0/cache: index*/level, size, type); 0 when it cannot be read.
int64_t last_level_cache_bytes(const std::string& cache_dir = "/sys/devices/system/cpu/cpu0/cache");

// A core's own data cache of `level` (2: its L2) in bytes, from the same folder (level 2: else from the CPU
// as the C library reads it); 0 when it cannot be read.
int64_t core_cache_bytes(int level, const std::string& cache_dir = "/sys/devices/system/cpu/cpu0/cache");

// The cache size the probes are sized against: the machine's, or an assumed 64 MiB where it is unknown.
int64_t probe_cache_bytes();

// Buffer sets (chain copies) for a probe whose buffers take `probe_bytes`: enough that together they take
// at least twice `cache_bytes`, at most kMaxColdSets.
constexpr int kMaxColdSets = 16384;  // chain copies are told apart by a 16-bit op layer
int cold_buffer_sets(int64_t probe_bytes, int64_t cache_bytes);

}  // namespace domino::prof
