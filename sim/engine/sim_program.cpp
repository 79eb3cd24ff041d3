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
  position_.resize(size_t(n));
  stream_.resize(size_t(n));
  for (int32_t i = 0; i < n; ++i) {
    const Stream stream = ops[size_t(i)].stream;
    std::vector<int32_t>& order = order_[static_cast<size_t>(stream)];
    stream_[size_t(i)] = stream;
    position_[size_t(i)] = static_cast<int32_t>(order.size());
    order.push_back(i);
  }
  wait_.assign(size_t(n), 0);
  for (int32_t i = 0; i < n; ++i)
    for (int32_t d : ops[size_t(i)].deps) require(i, d);
}

void SimProgram::throw_bad_dep(int32_t op, int32_t dep) const {
  throw_runtime("schedule: op " + op_id(schedule_->ops[size_t(op)]) + " depends on op index " + std::to_string(dep) +
                ", which is not another op of the schedule");
}

void SimProgram::throw_no_op(int32_t op) const {
  throw_runtime("simulation program: no op " + std::to_string(op) + " to add a dep to");
}

void SimProgram::reset() {
  for (auto it = changed_.rbegin(); it != changed_.rend(); ++it) wait_[size_t(it->first)] = it->second;
  changed_.clear();
}

}  // namespace domino
