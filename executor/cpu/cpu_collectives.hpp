// cpu_collectives.hpp: the CPU backend's collectives over the rank's Gloo group: AllReduce, and the
// sequence-parallel AllGather and ReduceScatter (sim/ir/schedule.hpp). Gloo works on contiguous float arrays:
// a strided AllReduce region, and the rows an AllGather or ReduceScatter exchanges (spread over the full
// buffer group by group, see executor/runtime/sp_collective.hpp), are packed into a staging array that each
// stream driver allocates once (collective_staging_floats), and unpacked after the collective.
#pragma once

#include <cstdint>

#include "executor/cpu/cpu_ops.hpp"

namespace domino {

class GlooComm;

struct CpuCollectiveContext {
  const CpuOpContext* ops = nullptr;  // the schedule and its buffers
  GlooComm* comm = nullptr;           // null only on a group of one
  int world = 1;
  double link_latency_us = 0;         // emulated per-hop latency, slept before each collective
};

// Floats of staging the collectives on `stream` need at most (0 when none needs any).
int64_t collective_staging_floats(const Schedule& schedule, Stream stream);

// Runs one AllReduce, AllGather or ReduceScatter; `staging` holds collective_staging_floats of the op's
// stream. Throws domino::Error naming the op (and the rank) on a malformed op or a failed collective.
void run_cpu_collective(const Op& op, const CpuCollectiveContext& c, float* staging);

}  // namespace domino
