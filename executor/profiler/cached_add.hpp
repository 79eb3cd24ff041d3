// cached_add.hpp: the residual add's speed on rows still in a core's cache, and that cache's size, for the
// rows a collective has just copied out before the add (sim/ir/schedule_fresh_rows.cpp,
// MemoryCost::cached_bandwidth_gbps, MemoryProfile::cache_bytes).
#pragma once

#include <cstdint>
#include <string>

#include "sim/cost/profile.hpp"

namespace domino::prof {

// GB/s of out = a + b over `floats` floats per operand, all three in cache: the median of repeated adds on
// the same buffers after a first one that brings them in.
double cached_add_gbps(int64_t floats);

// Sets memory.cache_bytes to the core's L2 and the residual add's cached bandwidth (per_code ResidualAdd,
// else per_kind elementwise, when the profile has that entry) from an add that takes half of it; returns a
// line for the report, or an empty string when the core's cache size is unknown (the profile unchanged).
std::string add_cached_add_figures(Profile& profile);

}  // namespace domino::prof
