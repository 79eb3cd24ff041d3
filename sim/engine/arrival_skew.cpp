// arrival_skew.cpp: the compute between consecutive collectives' launch points, and the skew it adds
// (see arrival_skew.hpp).
#include "sim/engine/arrival_skew.hpp"

#include <algorithm>

#include "sim/base/error.hpp"

namespace domino {

namespace {

constexpr int32_t kUnknown = -1;

// Per op, its launch point: compute ops the position after them on the compute stream (1-based), other
// ops the latest launch point among their deps (0: nothing computed yet). Communication ops are taken in
// their stream's program order; a dep on one not yet reached (a schedule the simulator will reject as a
// deadlock) counts as 0.
std::vector<int32_t> launch_points(const std::vector<Op>& ops) {
  const int32_t n = static_cast<int32_t>(ops.size());
  std::vector<int32_t> launch(ops.size(), kUnknown);
  int32_t position = 0;
  for (int32_t i = 0; i < n; ++i)
    if (ops[i].stream == Stream::Compute) launch[i] = ++position;
  for (int32_t i = 0; i < n; ++i) {
    if (ops[i].stream == Stream::Compute) continue;
    int32_t at = 0;
    for (int32_t d : ops[i].deps) {
      if (d < 0 || d >= n) throw_runtime("schedule: op " + op_id(ops[i]) + " depends on op index " + std::to_string(d) +
                                         ", which is not an op of the schedule");
      at = std::max(at, launch[d]);
    }
    launch[i] = at;
  }
  return launch;
}

// compute_between_collectives from the launch points, computed once by the caller.
std::vector<double> between_launches(const std::vector<Op>& ops, const std::vector<double>& duration,
                                     const std::vector<int32_t>& launch) {
  if (duration.size() != ops.size())
    throw_runtime("arrival skew: op costs of " + std::to_string(duration.size()) + " ops for a schedule of " +
                  std::to_string(ops.size()));
  // compute_before[p]: the compute stream's standalone work before launch point p.
  std::vector<double> compute_before(1, 0.0);
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].stream == Stream::Compute) compute_before.push_back(compute_before.back() + duration[i]);
  std::vector<double> between(ops.size(), 0.0);
  int32_t previous = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!collective(ops[i].kind)) continue;
    between[i] = std::max(0.0, compute_before[launch[i]] - compute_before[previous]);
    previous = std::max(previous, launch[i]);
  }
  return between;
}

// aligned_collectives from the launch points.
std::vector<char> aligned_at_launch(const std::vector<Op>& ops, const std::vector<int32_t>& launch) {
  std::vector<char> aligned(ops.size(), 0);
  int32_t previous = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!collective(ops[i].kind)) continue;
    aligned[i] = launch[i] <= previous;
    previous = std::max(previous, launch[i]);
  }
  return aligned;
}

}  // namespace

std::vector<double> compute_between_collectives(const Schedule& schedule, const std::vector<double>& duration) {
  return between_launches(schedule.ops, duration, launch_points(schedule.ops));
}

std::vector<char> aligned_collectives(const std::vector<Op>& ops) { return aligned_at_launch(ops, launch_points(ops)); }

std::vector<double> arrival_waits(const Schedule& schedule, const std::vector<double>& duration,
                                  ArrivalSkew skew) {
  std::vector<double> wait(duration.size(), 0.0);
  if (!(skew.sync_per_compute > 0) && !(skew.sync_us > 0)) return wait;
  const std::vector<int32_t> launch = launch_points(schedule.ops);
  const std::vector<double> between = skew.sync_per_compute > 0 ? between_launches(schedule.ops, duration, launch)
                                                                 : std::vector<double>(duration.size(), 0.0);
  const std::vector<char> aligned = aligned_at_launch(schedule.ops, launch);
  for (size_t i = 0; i < wait.size(); ++i)
    if (duration[i] > 0 && collective(schedule.ops[i].kind) && !aligned[i])
      wait[i] = skew.sync_us + skew.sync_per_compute * between[i];
  return wait;
}

const std::vector<double>& with_arrival_waits(const Schedule& schedule, const std::vector<double>& duration,
                                              ArrivalSkew skew, const std::vector<double>& wait,
                                              std::vector<double>& scratch) {
  if (!(skew.sync_per_compute > 0) && !(skew.sync_us > 0)) return duration;
  scratch = duration;
  // The cost model put sync_us in every collective: an aligned one gives it back, the others keep it and
  // add the growth.
  for (size_t i = 0; i < scratch.size(); ++i) {
    if (!(scratch[i] > 0) || !collective(schedule.ops[i].kind)) continue;
    scratch[i] = wait[i] > 0 ? scratch[i] + wait[i] - skew.sync_us : std::max(0.0, scratch[i] - skew.sync_us);
  }
  return scratch;
}

}  // namespace domino
