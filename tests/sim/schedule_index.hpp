// schedule_index.hpp: a built schedule indexed by op id, with the questions the order and overlap tests ask
// of it (program position, waits, what an AllReduce runs behind).
#pragma once

#include <algorithm>
#include <deque>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/ir/schedule.hpp"

namespace domino::test {

using Ids = std::vector<std::string>;

struct IndexedSchedule {
  Schedule s;
  std::map<std::string, int32_t> at;
  explicit IndexedSchedule(Schedule sched) : s(std::move(sched)) {
    for (const Op& op : s.ops) at[op_id(op)] = op.index;
  }
  // Throws for an id the schedule lacks: the test then fails naming it.
  int32_t pos(const std::string& id) const {
    const auto it = at.find(id);
    if (it == at.end()) throw std::runtime_error("no op " + id);
    return it->second;
  }
  const Op& op(const std::string& id) const { return s.ops[size_t(pos(id))]; }
  bool waits(const std::string& id, const std::string& on) const {
    const auto& d = op(id).deps;
    return std::find(d.begin(), d.end(), pos(on)) != d.end();
  }
  // The first compute op after `index` in program order.
  const Op& next_compute(int32_t index) const {
    for (size_t i = size_t(index) + 1; i < s.ops.size(); ++i) {
      if (s.ops[i].stream == Stream::Compute) return s.ops[i];
    }
    return s.ops.back();
  }
  // The next n compute-stream op ids from `first` on, in program order.
  Ids compute_from(const std::string& first, size_t n) const {
    Ids out;
    for (size_t i = size_t(pos(first)); i < s.ops.size() && out.size() < n; ++i)
      if (s.ops[i].stream == Stream::Compute) out.push_back(op_id(s.ops[i]));
    return out;
  }
  // What an AllReduce runs behind: the compute ops issued after its launch and before the first compute op
  // that waits for it, which is returned in *waiter.
  Ids overlapped(const std::string& allreduce, std::string* waiter) const {
    const int32_t ar = pos(allreduce);
    Ids between;
    for (size_t i = size_t(ar) + 1; i < s.ops.size(); ++i) {
      const Op& op = s.ops[i];
      if (op.stream != Stream::Compute) continue;
      if (std::find(op.deps.begin(), op.deps.end(), ar) != op.deps.end()) {
        *waiter = op_id(op);
        return between;
      }
      between.push_back(op_id(op));
    }
    *waiter = "<none>";
    return between;
  }
  // Whether `to` depends on `from` through any chain of waits and same-stream program order.
  bool reaches(const std::string& from, const std::string& to) const {
    std::vector<std::vector<int32_t>> waiters(s.ops.size());
    for (const Op& op : s.ops)
      for (int32_t d : op.deps) waiters[size_t(d)].push_back(op.index);
    std::vector<bool> seen(s.ops.size(), false);
    std::deque<int32_t> todo{pos(from)};
    const int32_t target = pos(to);
    while (!todo.empty()) {
      const int32_t i = todo.front();
      todo.pop_front();
      if (i == target) return true;
      if (seen[size_t(i)]) continue;
      seen[size_t(i)] = true;
      for (int32_t w : waiters[size_t(i)]) todo.push_back(w);
      for (size_t n = size_t(i) + 1; n < s.ops.size(); ++n) {
        if (s.ops[n].stream == s.ops[size_t(i)].stream) {
          todo.push_back(int32_t(n));
          break;
        }
      }
    }
    return false;
  }
};

}  // namespace domino::test
