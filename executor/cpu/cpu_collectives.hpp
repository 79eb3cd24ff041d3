// cpu_collectives.hpp: the CPU backend's collectives over the rank's Gloo group: AllReduce, and the
// sequence-parallel AllGather and ReduceScatter (sim/ir/schedule.hpp). Gloo works on contiguous float arrays:
// a strided AllReduce region, and the rows an AllGather or ReduceScatter exchanges (spread over the full
// buffer group by group, see executor/runtime/sp_collective.hpp), are packed into a staging array that each
// stream driver allocates once (collective_staging_floats), and unpacked after the collective. Gloo sets a
// ReduceScatter up once per op (set_up_cpu_collectives), and the driver keeps it for every iteration.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "executor/cpu/cpu_ops.hpp"

namespace domino {

class GlooComm;
class GlooReduceScatter;

struct CpuCollectiveContext {
  const CpuOpContext* ops = nullptr;  // the schedule and its buffers
  GlooComm* comm = nullptr;           // null only on a group of one
  int world = 1;
  double link_latency_us = 0;         // emulated per-hop latency, slept before each collective
};

// Floats of staging the collectives on `stream` need at most (0 when none needs any).
int64_t collective_staging_floats(const Schedule& schedule, Stream stream);

// What one stream driver keeps for its collectives from one iteration to the next.
struct CpuCollectiveState {
  explicit CpuCollectiveState(int64_t staging_floats);
  ~CpuCollectiveState();
  std::vector<float> staging;                                               // collective_staging_floats
  std::map<int32_t, std::unique_ptr<GlooReduceScatter>> reduce_scatters;  // by op index
};

// Sets up every ReduceScatter the schedule runs on `stream`, in op order, before the rank's first barrier.
// Gloo's reduce-scatter receives only into buffers registered beforehand: data a peer sends for a buffer not
// yet registered keeps Gloo's receiving thread polling the socket until it is, and under --realtime (every
// thread of the rank SCHED_FIFO on one core) the thread that would register it never runs again. Set up
// before the barrier that precedes every iteration, no peer can send before the buffers exist.
void set_up_cpu_collectives(const Schedule& schedule, Stream stream, const CpuCollectiveContext& c,
                            CpuCollectiveState& state);

// Runs one AllReduce, AllGather or ReduceScatter of the stream `state` belongs to. Throws domino::Error
// naming the op (and the rank) on a malformed op or a failed collective.
void run_cpu_collective(const Op& op, const CpuCollectiveContext& c, CpuCollectiveState& state);

}  // namespace domino
