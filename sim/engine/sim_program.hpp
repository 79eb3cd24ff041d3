// sim_program.hpp: a schedule's ops as the simulator's event loop reads them: each stream's program order
// and, per op, how many ops of the other stream must have finished before it may start. Worked out once per
// schedule; the tuner's probes of one class differ from their representative only in a few added deps, so
// it loads the representative once and adds each member's deps (add_dep) before simulating it.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "sim/ir/schedule.hpp"

namespace domino {

class SimProgram {
 public:
  SimProgram() = default;
  explicit SimProgram(const Schedule& schedule) { load(schedule); }

  // Checks every dep (an error naming the op when one is not another op of the schedule) and works out the
  // streams' orders and waits; keeps its memory from one load to the next. The schedule must outlive the
  // program's use (its ops name a blocked op in the deadlock error).
  void load(const Schedule& schedule);
  // Op `op` also waits for op `dep` (as if dep were in its deps); checked like the schedule's own deps.
  void add_dep(int32_t op, int32_t dep);
  // Back to the loaded schedule's deps: every add_dep undone.
  void reset();
  bool has_added_deps() const { return !changed_.empty(); }

  const Schedule& schedule() const { return *schedule_; }
  size_t size() const { return wait_.size(); }
  const std::vector<int32_t>& order(int stream) const { return order_[size_t(stream)]; }
  // Ops of the other stream that must have finished before `op` may start (the other stream finishes its
  // ops in program order, so that count stands for all of op's deps on it). kNever: op depends on an op
  // that comes at or after it on its own stream, so it can never start (the simulation reports a deadlock).
  const int32_t* waits() const { return wait_.data(); }
  static constexpr int32_t kNever = std::numeric_limits<int32_t>::max();

 private:
  void require(int32_t op, int32_t dep);  // folds one checked dep into wait_[op]

  const Schedule* schedule_ = nullptr;
  std::array<std::vector<int32_t>, kNumStreams> order_;
  std::vector<int32_t> place_;  // per op: its position in its stream's order, times kNumStreams, plus its stream
  std::vector<int32_t> wait_;
  std::vector<std::pair<int32_t, int32_t>> changed_;  // (op, its wait before) for each add_dep, in order
};

}  // namespace domino
