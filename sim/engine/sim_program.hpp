// sim_program.hpp: a schedule's ops as the simulator's event loop reads them: each stream's program order
// and, per op, how many ops of the other stream must have finished before it may start. Worked out once per
// schedule; the tuner's probes of one class differ from their representative only in a few added deps, so
// it loads the representative once and adds each member's deps (add_dep) before simulating it.
#pragma once

#include <algorithm>
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
  // Inline: the tuner adds a member's deps to every simulation of a class.
  void add_dep(int32_t op, int32_t dep) {
    if (op < 0 || op >= static_cast<int32_t>(wait_.size())) throw_no_op(op);
    changed_.emplace_back(op, wait_[size_t(op)]);
    require(op, dep);
  }
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
  // Folds one checked dep into wait_[op].
  void require(int32_t op, int32_t dep) {
    if (dep < 0 || dep >= static_cast<int32_t>(wait_.size()) || dep == op) throw_bad_dep(op, dep);
    int32_t& wait = wait_[size_t(op)];
    if (stream_[size_t(dep)] != stream_[size_t(op)]) {
      wait = std::max(wait, position_[size_t(dep)] + 1);
    } else if (position_[size_t(dep)] > position_[size_t(op)]) {
      wait = kNever;  // a dep later on the op's own stream: its stream can never reach it
    }
  }
  [[noreturn]] void throw_bad_dep(int32_t op, int32_t dep) const;
  [[noreturn]] void throw_no_op(int32_t op) const;

  const Schedule* schedule_ = nullptr;
  std::array<std::vector<int32_t>, kNumStreams> order_;
  std::vector<int32_t> position_;  // per op: its position in its stream's order
  std::vector<Stream> stream_;     // per op: its stream
  std::vector<int32_t> wait_;
  std::vector<std::pair<int32_t, int32_t>> changed_;  // (op, its wait before) for each add_dep, in order
};

}  // namespace domino
