// simulator.hpp: times a schedule with a cost model by discrete-event simulation of its streams.
#pragma once

#include <cstdint>

#include "sim/cost/cost_model.hpp"
#include "sim/engine/interference.hpp"
#include "sim/ir/schedule.hpp"
#include "sim/trace/timeline.hpp"

namespace domino {

struct SimOptions {
  bool record_timeline = true;  // false: figures only (the tuner's inner loop)
  // > 0: time every collective (AllReduce, AllGather, ReduceScatter) over this many ranks whatever the plan's
  // TP degree, to predict a one-GPU `domino-exec --emulate-comm --emulate-tp N` run (TP 1 shapes, TP N ring
  // traffic; the caller pins the profile's collectives to ring).
  int allreduce_ranks = 0;
  // false: peak_memory_bytes is left 0, for a caller that has it already (the tuner's probes of one class
  // share their buffers, which alone decide it).
  bool memory = true;
};

struct SimResult {
  double iteration_us = 0;
  double compute_us = 0;        // time the compute stream is busy
  double comm_us = 0;           // time the communication stream is busy
  double exposed_comm_us = 0;   // time communication runs while the compute stream is idle
  double overlap_fraction = 0;  // share of communication time hidden behind compute (1 - exposed/comm)
  int64_t peak_memory_bytes = 0;
  Timeline timeline;            // rank 0 (all ranks are symmetric); empty unless record_timeline
};

SimResult simulate(const Schedule& schedule, const CostModel& cost, const SimOptions& options = {});

// What a simulation takes from the cost model: every op's standalone duration and the interference rates.
// They depend on the ops but not on their deps, so schedules that differ only in deps (the tuner's probes)
// can share them: simulate(s, cost, options) is simulate(s, op_costs(s, cost, options), options). The arrival
// skew that grows with the compute between collectives depends on the deps, so simulate adds it per schedule
// (sim/engine/arrival_skew.hpp) from the rate kept here.
// A compute op's duration includes the profile's stall share and stall per op (the stream held that much
// longer after it).
struct OpCosts {
  std::vector<double> duration;
  Interference interference;
  // The profile's, at the schedule's level; 0 when the plan communicates nothing.
  double sync_per_compute = 0;
  // The profile's constant skew (sync_us) at that level, which every collective's duration includes: the
  // simulator takes it back from a collective the ranks reach with no compute run since the previous one.
  double sync_us = 0;
  // Whether the durations the simulator runs depend on the schedule's deps (through the arrival skew).
  bool skew_reads_deps() const { return sync_per_compute > 0 || sync_us > 0; }
  // A flat (CPU) profile: a recorded compute span is the op's own time; its losses show as a gap after it.
  bool compute_loss_between_ops = false;
  // The profile's flat factors: its compute_stall_share is already in the compute ops' durations; the event
  // loop reads the collectives' start wait (InterferenceProfile::comm_start_wait).
  InterferenceProfile flat_interference;
};
OpCosts op_costs(const Schedule& schedule, const CostModel& cost, const SimOptions& options = {});
// Stretches every compute op's duration by the profile's stall share (InterferenceProfile::
// compute_stall_share) and, where a collective of the schedule takes time (`duration`), by its slowdown in
// a communicating iteration (compute_slowdown_with_comm), then adds its stall per op
// (compute_stall_per_op_us).
void add_compute_stall(const Schedule& schedule, const CostModel& cost, std::vector<double>& duration);
// Ranks in each collective: the plan's TP degree unless the options emulate another.
int collective_ranks(const Schedule& schedule, const SimOptions& options);
// `us`, the cost model's duration of `op`; an error naming the op when it is negative, infinite or NaN.
double checked_duration(const Op& op, double us);
SimResult simulate(const Schedule& schedule, const OpCosts& costs, const SimOptions& options);
// The same from a program loaded from the schedule (sim_program.hpp), with any deps added to it: what the
// tuner runs per member of a probe class. Arrival skew reads the schedule's own deps, so costs with a skew
// rate take a program without added deps.
class SimProgram;
SimResult simulate(const SimProgram& program, const OpCosts& costs, const SimOptions& options);

}  // namespace domino
