// simulator.cpp: discrete-event simulation of the two in-order streams of one rank (all ranks of a TP
// group run the same schedule, so one rank stands for all). An op starts when its stream is free and all
// its deps have finished. While a compute op and a communication op run together both slow down; the
// rates change only at op starts and ends, so each op's remaining standalone work is re-timed at those
// events: the interference is integrated over time, not charged as a flat surcharge. The rates of two ops
// running together come from interference.hpp. A collective's wait for the last rank (arrival_skew.hpp) is
// charged as far as that rank's arrival still lies ahead when the collective's stream comes to it.
#include "sim/engine/simulator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>

#include "sim/base/error.hpp"
#include "sim/engine/arrival_skew.hpp"
#include "sim/engine/interference.hpp"
#include "sim/engine/sim_program.hpp"

namespace domino {

namespace {

constexpr int32_t kNone = -1;
// Work (standalone microseconds) below which a running op counts as finished: absorbs rounding when two
// ops end at the same instant.
constexpr double kEpsilonUs = 1e-9;

// One stream between events.
struct Lane {
  const int32_t* order;  // op indices in program order
  int32_t size;
  int32_t next = 0;      // position in order of the next op to start
  int32_t running = kNone;
  int32_t finished = 0;  // ops of this stream finished: the first `finished` of order
  double remaining = 0;  // standalone work left of the running op
  double started = 0;
  double ended = -std::numeric_limits<double>::infinity();  // when its last op finished (none: -inf)
};

// x / rate, without the division at rate 1 (an op running alone, the common case): the same value.
double at_rate(double x, double rate) { return rate == 1.0 ? x : x / rate; }

// The state of one simulation between events. Ops finish in program order on each stream, so an op may
// start once it is next on its idle stream and the other stream has finished its wait (SimProgram).
template <bool kRecord>
class Events {
 public:
  Events(const SimProgram& program, const double* duration, const double* arrival_wait, const OpCosts& costs,
         SimResult& result)
      : wait_(program.waits()),
        duration_(duration),
        arrival_wait_(arrival_wait),
        interference_(costs.interference),
        r_(result),
        c_{program.order(0).data(), int32_t(program.order(0).size())},
        m_{program.order(1).data(), int32_t(program.order(1).size())},
        flat_(costs.flat_interference),
        holds_(flat_.comm_start_wait_us > 0 || flat_.comm_resume_wait_us > 0) {
    if (arrival_wait_) compute_end_.reserve(program.order(0).size());
  }

  // Runs every op; false when both streams stop with ops left (a deadlock).
  bool run() {
    for (;;) {
      if (c_.running == kNone && may_start(c_, m_)) start(c_);
      if (m_.running == kNone && may_start(m_, c_) && !(holds_ && comm_start_held())) start(m_);
      if (m_.running == kNone) {
        if (c_.running == kNone) break;
        if (held_until_ >= 0)
          run_compute_until(held_until_);
        else
          run_alone<true>(c_, m_);
      } else if (c_.running == kNone) {
        run_alone<false>(m_, c_);
      } else {
        run_both();
      }
    }
    return c_.next == c_.size && m_.next == m_.size;
  }
  double now() const { return now_; }
  // The op the deadlock blocks: the compute stream's next, or the communication stream's if it has run out.
  int32_t blocked() const { return c_.next < c_.size ? c_.order[c_.next] : m_.order[m_.next]; }

 private:
  bool may_start(const Lane& s, const Lane& other) const {
    return s.next < s.size && wait_[s.order[s.next]] <= other.finished;
  }
  void start(Lane& s) {
    s.running = s.order[s.next++];
    s.remaining = &s == &m_ ? comm_work(s.running, now_) : duration_[s.running];
    s.started = now_;
  }
  // A communication op's work from `now`: its duration, but a collective's wait for the last rank only as far
  // as that rank's arrival (its compute deps' end + the wait) still lies ahead: one queued behind another
  // starts when that one ends, on the last rank too, and pays only what of the wait is left.
  double comm_work(int32_t op, double now) {
    comm_wait_ = 0;
    comm_delay_ = 0;
    if (!arrival_wait_ || !(arrival_wait_[op] > 0)) return duration_[op];
    const int32_t after = wait_[op];  // compute ops finished before it may start
    const double ready = after > 0 ? compute_end_[size_t(after - 1)] : 0;
    comm_wait_ = std::clamp(ready + arrival_wait_[op] - now, 0.0, arrival_wait_[op]);
    return duration_[op] - arrival_wait_[op] + comm_wait_;
  }
  // A finished op's span; a communication op's with the wait it paid: for the last rank, and beside compute
  // its delay, the time its peer's compute, slowed by the communication threads, arrives later (measured on
  // CPU ranks, a collective beside compute moves at its own speed once the last rank arrives).
  void record(int32_t op, double start, double end, bool comm) {
    OpSpan span{op, 0, start, end, {}};
    if (comm) span.arrival_wait_us = comm_wait_ + comm_delay_;
    r_.timeline.spans.push_back(span);
  }
  void finish(Lane& s) {
    if constexpr (kRecord) record(s.running, s.started, now_, &s == &m_);
    if (arrival_wait_ && &s == &c_) compute_end_.push_back(now_);
    s.running = kNone;
    s.ended = now_;
    ++s.finished;
  }
  // Whether the communication stream's next op, free to start, waits for the core the compute thread holds
  // (InterferenceProfile::comm_start_wait): while the compute stream runs an op, for at most the wait its
  // thread's sleep leaves; a thread still awake from the collective before starts at once, unless that
  // collective's end has just woken the compute thread (the compute stream was idle and starts an op now),
  // which then takes the core for up to comm_resume_wait_us.
  bool comm_start_held() {
    if (c_.running == kNone || (held_until_ >= 0 && now_ >= held_until_)) {
      held_until_ = -1;
      return false;
    }
    if (held_until_ < 0) {
      double wait = 0;
      if (m_.ended != now_)
        wait = flat_.comm_start_wait(now_ - m_.ended);  // never ran: slept forever
      else if (c_.started == now_ && c_.ended < now_)
        wait = flat_.comm_resume_wait_us;
      if (!(wait > kEpsilonUs)) return false;
      held_until_ = now_ + wait;
    }
    return true;
  }
  // The compute stream alone while the communication stream's next op is held: to its op's end or the
  // deadline, the first to come (the deadline reached exactly, so that the held op starts there).
  void run_compute_until(double deadline) {
    if (c_.remaining <= deadline - now_) {
      r_.compute_us += c_.remaining;
      now_ += c_.remaining;
      finish(c_);
      return;
    }
    r_.compute_us += deadline - now_;
    c_.remaining -= deadline - now_;
    now_ = deadline;
  }
  // `s` runs its ops at rate 1 while the other stream stays idle: until the other's next op may start (its
  // wait reached) or s's next one may not. The same sums, in the same order, as one event per op, kept in
  // locals for the run (the stores through result and lanes would otherwise be reloaded per op).
  template <bool kCompute>
  void run_alone(Lane& s, const Lane& other) {
    const int32_t until = other.next < other.size ? wait_[other.order[other.next]] : SimProgram::kNever;
    const int32_t other_finished = other.finished;
    double now = now_, busy = kCompute ? r_.compute_us : r_.comm_us, exposed = r_.exposed_comm_us;
    double remaining = s.remaining, started = s.started;
    int32_t running = s.running, next = s.next, finished = s.finished;
    for (;;) {
      const double dt = remaining;
      busy += dt;
      if (!kCompute) exposed += dt;
      now += dt;
      if constexpr (kRecord) record(running, started, now, !kCompute);
      if (kCompute && arrival_wait_) compute_end_.push_back(now);
      ++finished;
      if (finished >= until || next >= s.size || wait_[s.order[next]] > other_finished) break;
      running = s.order[next++];
      remaining = kCompute ? duration_[running] : comm_work(running, now);
      started = now;
    }
    now_ = now;
    (kCompute ? r_.compute_us : r_.comm_us) = busy;
    r_.exposed_comm_us = exposed;
    s.running = kNone;
    s.next = next;
    s.finished = finished;
    s.ended = now;
  }
  // Both streams busy: to the next op end at the rates of the two together, no communication exposed.
  void run_both() {
    const Rates rate = interference_.rates(c_.running, m_.running);
    const double dt = std::min(at_rate(c_.remaining, rate[0]), at_rate(m_.remaining, rate[1]));
    r_.compute_us += dt;
    r_.comm_us += dt;
    now_ += dt;
    if constexpr (kRecord) comm_delay_ += dt * interference_.delay_share(m_.running);
    Lane* lanes[kNumStreams] = {&c_, &m_};
    for (int s = 0; s < kNumStreams; ++s) {
      Lane& lane = *lanes[s];
      lane.remaining -= rate[s] * dt;
      if (lane.remaining > kEpsilonUs && at_rate(lane.remaining, rate[s]) > kEpsilonUs) continue;
      finish(lane);
    }
  }

  const int32_t* wait_;
  const double* duration_;
  const double* arrival_wait_;       // per op, the wait for the last rank its duration holds; null: none
  std::vector<double> compute_end_;  // with arrival_wait_: when each compute op ended, in program order
  double comm_wait_ = 0;             // of the communication op running: the wait it pays
  double comm_delay_ = 0;            // and, recording, what of its time beside compute its delay took
  const Interference& interference_;
  SimResult& r_;
  Lane c_, m_;
  const InterferenceProfile& flat_;
  const bool holds_;        // whether the profile holds a collective's start at all
  double held_until_ = -1;  // until when the communication stream's next op is held, or -1
  double now_ = 0;
};

[[noreturn]] void throw_deadlock(const SimProgram& program, int32_t blocked) {
  throw_runtime("schedule deadlocks: op " + op_id(program.schedule().ops[size_t(blocked)]) +
                " waits on an op that can never run (a dep that comes later on its own stream)");
}

// The event loop: every op timed, the busy times booked; the iteration time.
template <bool kRecord>
double run_events(const SimProgram& program, const double* duration, const double* arrival_wait,
                  const OpCosts& costs, SimResult& result) {
  Events<kRecord> events(program, duration, arrival_wait, costs, result);
  if (!events.run()) throw_deadlock(program, events.blocked());
  return events.now();
}

}  // namespace

int collective_ranks(const Schedule& schedule, const SimOptions& options) {
  const int plan_tp = schedule.plan.tp > 0 ? schedule.plan.tp : schedule.model.tp;
  return options.allreduce_ranks > 0 ? options.allreduce_ranks : plan_tp;
}

double checked_duration(const Op& op, double us) {
  if (!(us >= 0 && us <= kMaxTimeUs)) {
    throw_runtime("cost model gives op " + op_id(op) + " a duration of " + fmt::format("{:.6g}", us) +
                  " us (flops " + std::to_string(op.flops) + ", bytes " + std::to_string(op.bytes) +
                  "): not a time between 0 and 1e12 us (11.6 days); does the profile describe this machine?");
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
  add_compute_stall(schedule, cost, duration);
  Interference interference(schedule, cost, tp, duration);
  const bool comm = schedule.plan.comm_enabled;
  return OpCosts{std::move(duration),
                 std::move(interference),
                 comm ? cost.sync_per_compute(tp, devices_per_node) : 0,
                 comm ? cost.sync_us(tp, devices_per_node) : 0,
                 !cost.profile().gpu,
                 cost.profile().interference};
}

void add_compute_stall(const Schedule& schedule, const CostModel& cost, std::vector<double>& duration) {
  const InterferenceProfile& flat = cost.profile().interference;
  // Whether a collective takes time, looked up only where the profile slows such an iteration's compute: the
  // tuner costs tens of thousands of schedules.
  bool communicates = false;
  for (size_t i = 0; flat.compute_slowdown_with_comm > 0 && i < duration.size() && !communicates; ++i)
    communicates = collective(schedule.ops[i].kind) && duration[i] > 0;
  const double stretch =
      (1 + flat.compute_stall_share) * (communicates ? 1 + flat.compute_slowdown_with_comm : 1);
  const double per_op = flat.compute_stall_per_op_us;
  if (stretch != 1 || per_op > 0)
    for (size_t i = 0; i < duration.size(); ++i)
      if (schedule.ops[i].stream == Stream::Compute) duration[i] = duration[i] * stretch + per_op;
}

SimResult simulate(const Schedule& schedule, const CostModel& cost, const SimOptions& options) {
  return simulate(schedule, op_costs(schedule, cost, options), options);
}

SimResult simulate(const Schedule& schedule, const OpCosts& costs, const SimOptions& options) {
  thread_local SimProgram program;  // its memory kept: the tuner runs tens of thousands back to back
  program.load(schedule);
  return simulate(program, costs, options);
}

SimResult simulate(const SimProgram& program, const OpCosts& costs, const SimOptions& options) {
  const Schedule& schedule = program.schedule();
  if (costs.duration.size() != program.size())
    throw_runtime("simulate: op costs of " + std::to_string(costs.duration.size()) + " ops for a schedule of " +
                  std::to_string(program.size()));
  // The skew reads the schedule's deps: a program with deps of its own would be timed with the wrong ones.
  if (costs.skew_reads_deps() && program.has_added_deps())
    throw_runtime("simulate: arrival skew needs the schedule's own deps, and the program has deps added");
  std::vector<double> skewed;  // the durations with this schedule's arrival skew, when the profile has one
  const ArrivalSkew skew{costs.sync_us, costs.sync_per_compute};
  // Each collective's wait for the last rank, kept for the timeline; none (and nothing allocated: the tuner
  // simulates tens of thousands of schedules) without a skew.
  const std::vector<double> wait = skew.sync_us > 0 || skew.sync_per_compute > 0
                                       ? arrival_waits(schedule, costs.duration, skew)
                                       : std::vector<double>{};
  const std::vector<double>& duration = with_arrival_waits(schedule, costs.duration, skew, wait, skewed);
  const double* arrival_wait = wait.empty() ? nullptr : wait.data();

  SimResult result;
  Timeline& tl = result.timeline;
  if (options.record_timeline) {
    tl.source = "predicted";
    tl.ranks = 1;
    tl.spans.reserve(program.size());
    result.iteration_us = run_events<true>(program, duration.data(), arrival_wait, costs, result);
  } else {
    result.iteration_us = run_events<false>(program, duration.data(), arrival_wait, costs, result);
  }
  result.overlap_fraction = result.comm_us > 0 ? 1.0 - result.exposed_comm_us / result.comm_us : 1.0;
  result.peak_memory_bytes = options.memory ? schedule_memory_bytes(schedule) : 0;
  if (options.record_timeline) {
    // A CPU compute op's span is its own time alone: what it lost beside a collective and the stream's stall
    // show as a gap before the stream's next op (the compute thread holds its core through an op; the
    // communication threads take it between ops).
    if (costs.compute_loss_between_ops)
      for (OpSpan& s : tl.spans)
        if (schedule.ops[size_t(s.op)].stream == Stream::Compute)
          s.end_us =
              s.start_us + (costs.duration[size_t(s.op)] - costs.flat_interference.compute_stall_per_op_us) /
                               (1 + costs.flat_interference.compute_stall_share);
    // A collective's span holds the wait for the last rank that the skew and the delay beside compute charged
    // it, as the event loop paid it: recorded, so that domino-compare can score the transfer and the wait
    // apart.
    for (OpSpan& s : tl.spans)
      if (!collective(schedule.ops[size_t(s.op)].kind)) s.arrival_wait_us = -1;
    tl.iteration_us = result.iteration_us;
    tl.peak_memory_bytes = {result.peak_memory_bytes};
  }
  return result;
}

}  // namespace domino
