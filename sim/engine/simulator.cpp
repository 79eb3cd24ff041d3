// simulator.cpp: discrete-event simulation of the two in-order streams of one rank (all ranks of a TP
// group run the same schedule, so one rank stands for all). An op starts when its stream is free and all
// its deps have finished. While a compute op and a communication op run together both slow down; the
// rates change only at op starts and ends, so each op's remaining standalone work is re-timed at those
// events: the interference is integrated over time, not charged as a flat surcharge. The rates of two ops
// running together come from interference.hpp.
#include "sim/engine/simulator.hpp"

#include <algorithm>
#include <array>
#include <limits>

#include "sim/base/error.hpp"
#include "sim/engine/arrival_skew.hpp"
#include "sim/engine/interference.hpp"

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
  int32_t finished = 0;  // ops of this stream finished: the first `finished` of order
};
using Streams = std::array<StreamState, kNumStreams>;

// Ops finish in program order on each stream, so op i's deps are done once each stream has finished
// need[i][stream] ops (one past the last dep on it in its program order).
using Need = std::array<int32_t, kNumStreams>;
static_assert(kNumStreams == 2, "deps_done reads both streams");

// The state of one simulation between events.
struct EventState {
  const std::vector<Op>& ops;
  const std::vector<double>& duration;  // standalone, from the cost model
  const Need* need = nullptr;           // per op
  Streams streams;
  double now = 0;
  int32_t done = 0;
};
// What a simulation fills before its events, kept per thread from one simulation to the next (the tuner runs
// tens of thousands back to back): no allocation once the vectors have grown.
struct EventScratch {
  std::vector<Need> need;
  std::vector<int32_t> place;  // each op's position in its stream's order, times kNumStreams, plus its stream
  std::array<std::vector<int32_t>, kNumStreams> order;
};

// Every op's deps checked, each stream's program order (moved into st, back into the scratch after the
// simulation) and every op's need.
void load_ops(const Schedule& schedule, EventScratch& scratch, EventState& st) {
  const std::vector<Op>& ops = schedule.ops;
  const int32_t n = static_cast<int32_t>(ops.size());
  if (st.duration.size() != ops.size())
    throw_runtime("simulate: op costs of " + std::to_string(st.duration.size()) + " ops for a schedule of " +
                  std::to_string(n));
  for (auto& order : scratch.order) order.clear();
  scratch.place.resize(size_t(n));
  for (int32_t i = 0; i < n; ++i) {
    const int stream = static_cast<int>(ops[i].stream);
    std::vector<int32_t>& order = scratch.order[stream];
    scratch.place[i] = static_cast<int32_t>(order.size()) * kNumStreams + stream;
    order.push_back(i);
  }
  scratch.need.assign(size_t(n), Need{});
  for (int32_t i = 0; i < n; ++i) {
    const Op& op = ops[i];
    for (int32_t d : op.deps) {
      if (d < 0 || d >= n || d == i) {
        throw_runtime("schedule: op " + op_id(op) + " depends on op index " + std::to_string(d) +
                      ", which is not another op of the schedule");
      }
      const int32_t place = scratch.place[d];
      int32_t& need = scratch.need[i][place % kNumStreams];
      need = std::max(need, place / kNumStreams + 1);
    }
  }
  st.need = scratch.need.data();
  for (int s = 0; s < kNumStreams; ++s) st.streams[s].order = std::move(scratch.order[s]);
}

// x / rate, without the division at rate 1 (an op running alone, the common case): the same value.
double at_rate(double x, double rate) { return rate == 1.0 ? x : x / rate; }

bool deps_done(const EventState& st, int32_t i) {
  const Need& need = st.need[i];
  return need[0] <= st.streams[0].finished && need[1] <= st.streams[1].finished;
}

// Starts every op whose stream is free and whose deps are done. Starting one op can unblock the other
// stream only through a finish, so one pass per stream suffices; zero-length ops finish in the timing step
// like any other.
void start_ready_ops(EventState& st) {
  for (StreamState& s : st.streams) {
    if (s.running != kNone || s.next >= s.order.size()) continue;
    const int32_t i = s.order[s.next];
    if (!deps_done(st, i)) continue;
    s.running = i;
    s.remaining = st.duration[i];
    s.started = st.now;
    ++s.next;
  }
}

[[noreturn]] void throw_deadlock(const EventState& st) {
  const StreamState& compute = st.streams[static_cast<int>(Stream::Compute)];
  const StreamState& blocked = compute.next < compute.order.size() ? compute : st.streams[static_cast<int>(Stream::Comm)];
  throw_runtime("schedule deadlocks: op " + op_id(st.ops[blocked.order[blocked.next]]) +
                " waits on an op that can never run (a dep that comes later on its own stream)");
}

inline void finish(EventState& st, StreamState& ss, SimResult& result, bool record_timeline) {
  if (record_timeline) result.timeline.spans.push_back(OpSpan{ss.running, 0, ss.started, st.now});
  ss.running = kNone;
  ++ss.finished;
  ++st.done;
}

// An op running alone runs at rate 1 until it ends: the general step below, in short (same sums).
inline void run_alone(EventState& st, StreamState& ss, bool compute, SimResult& result,
                      bool record_timeline) {
  const double dt = ss.remaining;
  if (compute) {
    result.compute_us += dt;
  } else {
    result.comm_us += dt;
    result.exposed_comm_us += dt;
  }
  st.now += dt;
  ss.remaining = 0;
  finish(st, ss, result, record_timeline);
}

// Advances to the next op end at the current rates: books the busy times, finishes the ops that end.
void advance_to_next_end(EventState& st, const Interference& interference, SimResult& result,
                         bool record_timeline) {
  StreamState& compute = st.streams[static_cast<int>(Stream::Compute)];
  StreamState& comm = st.streams[static_cast<int>(Stream::Comm)];
  if (comm.running == kNone) return run_alone(st, compute, true, result, record_timeline);
  if (compute.running == kNone) return run_alone(st, comm, false, result, record_timeline);
  // Both streams busy: at the rates of the two together, no communication exposed.
  const Rates rate = interference.rates(compute.running, comm.running);
  double dt = std::numeric_limits<double>::infinity();
  for (int s = 0; s < kNumStreams; ++s) dt = std::min(dt, at_rate(st.streams[s].remaining, rate[s]));
  result.compute_us += dt;
  result.comm_us += dt;
  st.now += dt;
  for (int s = 0; s < kNumStreams; ++s) {
    StreamState& ss = st.streams[s];
    ss.remaining -= rate[s] * dt;
    if (ss.remaining > kEpsilonUs && at_rate(ss.remaining, rate[s]) > kEpsilonUs) continue;
    finish(st, ss, result, record_timeline);
  }
}

bool all_idle(const Streams& streams) {
  return std::all_of(streams.begin(), streams.end(), [](const StreamState& s) { return s.running == kNone; });
}

}  // namespace

int collective_ranks(const Schedule& schedule, const SimOptions& options) {
  const int plan_tp = schedule.plan.tp > 0 ? schedule.plan.tp : schedule.model.tp;
  return options.allreduce_ranks > 0 ? options.allreduce_ranks : plan_tp;
}

double checked_duration(const Op& op, double us) {
  if (!(us >= 0 && us < std::numeric_limits<double>::infinity())) {
    throw_runtime("cost model gives op " + op_id(op) + " a duration of " + std::to_string(us) + " us (flops " +
                  std::to_string(op.flops) + ", bytes " + std::to_string(op.bytes) + ")");
  }
  return us;
}

OpCosts op_costs(const Schedule& schedule, const CostModel& cost, const SimOptions& options) {
  const int tp = collective_ranks(schedule, options);
  const int devices_per_node = cost.profile().devices_per_node;
  std::vector<double> duration(schedule.ops.size());
  for (size_t i = 0; i < duration.size(); ++i) {
    const Op& op = schedule.ops[i];
    const bool silent = collective(op.kind) && !schedule.plan.comm_enabled;
    duration[i] = checked_duration(op, silent ? 0.0 : cost.op_us(op, tp, devices_per_node));
  }
  Interference interference(schedule, cost, tp, duration);
  const double sync_per_compute = schedule.plan.comm_enabled ? cost.sync_per_compute(tp, devices_per_node) : 0;
  return OpCosts{std::move(duration), std::move(interference), sync_per_compute};
}

SimResult simulate(const Schedule& schedule, const CostModel& cost, const SimOptions& options) {
  return simulate(schedule, op_costs(schedule, cost, options), options);
}

SimResult simulate(const Schedule& schedule, const OpCosts& costs, const SimOptions& options) {
  std::vector<double> skewed;  // the durations with this schedule's arrival skew, when the profile has a rate
  thread_local EventScratch scratch;
  EventState st{schedule.ops, with_arrival_skew(schedule, costs.duration, costs.sync_per_compute, skewed), nullptr, {}, 0, 0};
  load_ops(schedule, scratch, st);

  SimResult result;
  Timeline& tl = result.timeline;
  if (options.record_timeline) {
    tl.source = "predicted";
    tl.ranks = 1;
    tl.spans.reserve(schedule.ops.size());
  }
  const Interference& interference = costs.interference;
  const int32_t n = static_cast<int32_t>(schedule.ops.size());
  while (st.done < n) {
    start_ready_ops(st);
    if (all_idle(st.streams)) throw_deadlock(st);
    advance_to_next_end(st, interference, result, options.record_timeline);
  }
  for (int s = 0; s < kNumStreams; ++s) scratch.order[s] = std::move(st.streams[s].order);

  result.iteration_us = st.now;
  result.overlap_fraction = result.comm_us > 0 ? 1.0 - result.exposed_comm_us / result.comm_us : 1.0;
  result.peak_memory_bytes = options.memory ? schedule_memory_bytes(schedule) : 0;
  if (options.record_timeline) {
    tl.iteration_us = st.now;
    tl.peak_memory_bytes = {result.peak_memory_bytes};
  }
  return result;
}

}  // namespace domino
