// op_cost_cache.cpp: op costs kept across schedules by OpCostKey (op_cost_cache.hpp).
#include "sim/engine/op_cost_cache.hpp"

namespace domino {

// The contention facts of the schedule being costed, from its ops' entries.
class OpCostCache::Facts final : public ContentionFacts {
 public:
  Facts(OpCostCache& cache, const std::vector<Op>& ops) : c_(cache), ops_(ops) {}
  int collective_sms(int32_t i) override {
    Entry& e = entry(i);
    if (e.sms < 0) e.sms = c_.cost_.collective_sms(ops_[size_t(i)], c_.tp_, c_.cost_.profile().devices_per_node);
    return e.sms;
  }
  double collective_hbm_bytes(int32_t i) override {
    Entry& e = entry(i);
    if (e.hbm_bytes < 0) e.hbm_bytes = c_.cost_.collective_hbm_bytes(ops_[size_t(i)], c_.tp_);
    return e.hbm_bytes;
  }
  int32_t alike(int32_t i) override {
    Entry& e = entry(i);
    if (e.seen_in != c_.generation_) {
      e.seen_in = c_.generation_;
      e.first_op = i;
    }
    return e.first_op;
  }
  double us_on_sms(int32_t i, int sms_available) override {
    Entry& e = entry(i);
    for (const auto& [sms, us] : e.on_sms)
      if (sms == sms_available) return us;
    e.on_sms.emplace_back(sms_available, c_.cost_.gemm_us_on_sms(ops_[size_t(i)], sms_available));
    return e.on_sms.back().second;
  }

 private:
  Entry& entry(int32_t i) { return c_.entries_[size_t(c_.entry_[size_t(i)])]; }
  OpCostCache& c_;
  const std::vector<Op>& ops_;
};

void OpCostCache::grow() {
  table_.assign(table_.empty() ? 1024 : 2 * table_.size(), -1);
  const size_t mask = table_.size() - 1;
  for (size_t e = 0; e < entries_.size(); ++e) {
    size_t h = OpCostKeyHash()(entries_[e].key) & mask;
    while (table_[h] >= 0) h = (h + 1) & mask;
    table_[h] = int32_t(e);
  }
}

int32_t OpCostCache::entry_of(const Op& op) {
  const OpCostKey key(op);
  const size_t mask = table_.size() - 1;
  size_t h = OpCostKeyHash()(key) & mask;
  for (; table_[h] >= 0; h = (h + 1) & mask)
    if (entries_[size_t(table_[h])].key == key) return table_[h];
  return add_entry(op, key, h);
}

// Out of line: a search meets few distinct ops, so the lookup above stays small.
[[gnu::noinline]] int32_t OpCostCache::add_entry(const Op& op, const OpCostKey& key, size_t slot) {
  const double us = checked_duration(op, cost_.op_us(op, tp_, cost_.profile().devices_per_node));
  table_[slot] = int32_t(entries_.size());
  entries_.push_back(Entry{key, us, -1, -1, {}, 0, 0});  // contention facts unknown until asked
  if (2 * (entries_.size() + 1) > table_.size()) grow();  // a free slot for the next op's lookup
  return int32_t(entries_.size() - 1);
}

OpCosts OpCostCache::op_costs(const Schedule& schedule, const SimOptions& options) {
  if (!schedule.plan.comm_enabled || collective_ranks(schedule, options) != tp_)
    return domino::op_costs(schedule, cost_, options);
  ++generation_;
  const std::vector<Op>& ops = schedule.ops;
  entry_.resize(ops.size());
  std::vector<double> duration(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    entry_[i] = entry_of(ops[i]);
    duration[i] = entries_[size_t(entry_[i])].us;
  }
  add_compute_stall(schedule, cost_, duration);
  Facts facts(*this, ops);
  Interference interference(schedule, cost_, duration, facts);
  return OpCosts{std::move(duration),
                 std::move(interference),
                 cost_.sync_per_compute(tp_, cost_.profile().devices_per_node),
                 cost_.sync_us(tp_, cost_.profile().devices_per_node),
                 !cost_.profile().gpu,
                 cost_.profile().interference};
}

}  // namespace domino
