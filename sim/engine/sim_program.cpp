// sim_program.cpp: the streams' orders and cross-stream waits of a schedule (sim_program.hpp).
#include "sim/engine/sim_program.hpp"

#include <algorithm>
#include <string>

#include "sim/base/error.hpp"

namespace domino {

void SimProgram::load(const Schedule& schedule) {
  schedule_ = &schedule;
  const std::vector<Op>& ops = schedule.ops;
  const int32_t n = static_cast<int32_t>(ops.size());
  for (auto& order : order_) order.clear();
  changed_.clear();
  place_.resize(size_t(n));
  for (int32_t i = 0; i < n; ++i) {
    const int stream = static_cast<int>(ops[size_t(i)].stream);
    std::vector<int32_t>& order = order_[size_t(stream)];
    place_[size_t(i)] = static_cast<int32_t>(order.size()) * kNumStreams + stream;
    order.push_back(i);
  }
  wait_.assign(size_t(n), 0);
  for (int32_t i = 0; i < n; ++i)
    for (int32_t d : ops[size_t(i)].deps) require(i, d);
}

void SimProgram::require(int32_t op, int32_t dep) {
  const int32_t n = static_cast<int32_t>(wait_.size());
  if (dep < 0 || dep >= n || dep == op) {
    throw_runtime("schedule: op " + op_id(schedule_->ops[size_t(op)]) + " depends on op index " +
                  std::to_string(dep) + ", which is not another op of the schedule");
  }
  const int32_t at = place_[size_t(dep)], own = place_[size_t(op)];
  int32_t& wait = wait_[size_t(op)];
  if (at % kNumStreams != own % kNumStreams) {
    wait = std::max(wait, at / kNumStreams + 1);
  } else if (at > own) {
    wait = kNever;  // a dep later on the op's own stream: its stream can never reach it
  }
}

void SimProgram::add_dep(int32_t op, int32_t dep) {
  if (op < 0 || op >= static_cast<int32_t>(wait_.size()))
    throw_runtime("simulation program: no op " + std::to_string(op) + " to add a dep to");
  changed_.emplace_back(op, wait_[size_t(op)]);
  require(op, dep);
}

void SimProgram::reset() {
  for (auto it = changed_.rbegin(); it != changed_.rend(); ++it) wait_[size_t(it->first)] = it->second;
  changed_.clear();
}

}  // namespace domino
