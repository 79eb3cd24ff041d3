// collective_traffic.hpp: the bytes a collective moves per rank, shared by the cost model (which divides
// them by a bus bandwidth) and the CUDA backend's --emulate-comm (which moves exactly this much).
#pragma once

namespace domino {

// Bytes each rank moves in a ring AllReduce of `bytes` over `ranks` ranks (2 (n-1)/n of it; none alone).
inline double ring_allreduce_traffic(double bytes, int ranks) {
  return ranks > 1 ? bytes * 2.0 * (ranks - 1) / ranks : 0.0;
}

// Bytes each rank moves in a ring AllGather or ReduceScatter whose gathered (full) buffer holds `bytes`
// ((n-1)/n of it: every rank receives, or sends, every other rank's part once).
inline double ring_gather_traffic(double bytes, int ranks) {
  return ranks > 1 ? bytes * double(ranks - 1) / ranks : 0.0;
}

}  // namespace domino
