// simulator.cpp: discrete-event simulation of the two in-order streams of one rank (all ranks of a TP
// group run the same schedule, so one rank stands for all). An op starts when its stream is free and all
// its deps have finished. While a compute op and a communication op run together both slow down; the
// rates change only at op starts and ends, so each op's remaining standalone work is re-timed at those
// events: the interference is integrated over time, not charged as a flat surcharge.
#include "sim/engine/simulator.hpp"

#include <algorithm>
#include <array>
#include <limits>

#include "sim/base/error.hpp"

namespace domino {

namespace {

constexpr int32_t kNone = -1;
// Work (standalone microseconds) below which a running op counts as finished: absorbs rounding when two
// ops end at the same instant.
constexpr double kEpsilonUs = 1e-9;

struct StreamState {
  std::vector<int32_t> order;  // op indices in program order
  size_t next = 0;             // position in order of the next op to start
  int32_t running = kNone;
  double remaining = 0;  // standalone work left of the running op
  double started = 0;
};

}  // namespace

SimResult simulate(const Schedule& schedule, const CostModel& cost, const SimOptions& options) {
  const std::vector<Op>& ops = schedule.ops;
  const int32_t n = static_cast<int32_t>(ops.size());
  const int plan_tp = schedule.plan.tp > 0 ? schedule.plan.tp : schedule.model.tp;
  const int tp = options.allreduce_ranks > 0 ? options.allreduce_ranks : plan_tp;
  const int devices_per_node = cost.profile().devices_per_node;
  const bool comm_enabled = schedule.plan.comm_enabled;

  std::vector<double> duration(n);
  std::vector<double> finish(n, -1.0);
  StreamState streams[kNumStreams];
  for (auto& s : streams) s.order.reserve(ops.size());
  for (int32_t i = 0; i < n; ++i) {
    const Op& op = ops[i];
    for (int32_t d : op.deps) {
      if (d < 0 || d >= n || d == i) {
        throw_runtime("schedule: op " + op_id(op) + " depends on op index " + std::to_string(d) +
                      ", which is not another op of the schedule");
      }
    }
    const bool silent = op.kind == OpKind::AllReduce && !comm_enabled;
    duration[i] = silent ? 0.0 : cost.op_us(op, tp, devices_per_node);
    if (!(duration[i] >= 0 && duration[i] < std::numeric_limits<double>::infinity())) {
      throw_runtime("cost model gives op " + op_id(op) + " a duration of " + std::to_string(duration[i]) +
                    " us (flops " + std::to_string(op.flops) + ", bytes " + std::to_string(op.bytes) + ")");
    }
    streams[static_cast<int>(op.stream)].order.push_back(i);
  }

  SimResult result;
  Timeline& tl = result.timeline;
  if (options.record_timeline) {
    tl.source = "predicted";
    tl.ranks = 1;
    tl.spans.reserve(ops.size());
  }
  const std::array<double, kNumStreams> rate_both = {1.0 / (1.0 + cost.compute_slowdown()),
                                                      1.0 / (1.0 + cost.comm_slowdown())};

  double now = 0;
  int32_t done = 0;
  StreamState& compute = streams[static_cast<int>(Stream::Compute)];
  StreamState& comm = streams[static_cast<int>(Stream::Comm)];
  while (done < n) {
    // Start every op whose stream is free and whose deps are done. Starting one op can unblock the
    // other stream only through a finish, so one pass per stream suffices; zero-length ops finish in
    // the timing step below like any other.
    for (StreamState& s : streams) {
      if (s.running != kNone || s.next >= s.order.size()) continue;
      const int32_t i = s.order[s.next];
      bool ready = true;
      for (int32_t d : ops[i].deps) {
        if (finish[d] < 0) {
          ready = false;
          break;
        }
      }
      if (!ready) continue;
      s.running = i;
      s.remaining = duration[i];
      s.started = now;
      ++s.next;
    }
    const bool both = compute.running != kNone && comm.running != kNone;
    if (compute.running == kNone && comm.running == kNone) {
      const StreamState& blocked = compute.next < compute.order.size() ? compute : comm;
      throw_runtime("schedule deadlocks: op " + op_id(ops[blocked.order[blocked.next]]) +
                    " waits on an op that can never run (a dep that comes later on its own stream)");
    }
    // Advance to the next op end at the current rates.
    const std::array<double, kNumStreams> rate = both ? rate_both : std::array<double, kNumStreams>{1.0, 1.0};
    double dt = std::numeric_limits<double>::infinity();
    for (int s = 0; s < kNumStreams; ++s)
      if (streams[s].running != kNone) dt = std::min(dt, streams[s].remaining / rate[s]);
    if (compute.running != kNone) result.compute_us += dt;
    if (comm.running != kNone) {
      result.comm_us += dt;
      if (compute.running == kNone) result.exposed_comm_us += dt;
    }
    now += dt;
    for (int s = 0; s < kNumStreams; ++s) {
      StreamState& st = streams[s];
      if (st.running == kNone) continue;
      st.remaining -= rate[s] * dt;
      if (st.remaining > kEpsilonUs && st.remaining / rate[s] > kEpsilonUs) continue;
      finish[st.running] = now;
      if (options.record_timeline) tl.spans.push_back(OpSpan{st.running, 0, st.started, now});
      st.running = kNone;
      ++done;
    }
  }

  result.iteration_us = now;
  result.overlap_fraction = result.comm_us > 0 ? 1.0 - result.exposed_comm_us / result.comm_us : 1.0;
  result.peak_memory_bytes = schedule_memory_bytes(schedule);
  if (options.record_timeline) {
    tl.iteration_us = now;
    tl.peak_memory_bytes = {result.peak_memory_bytes};
  }
  return result;
}

}  // namespace domino
