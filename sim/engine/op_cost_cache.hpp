// op_cost_cache.hpp: the op costs of many schedules timed under one cost model and TP degree (the tuner's
// probe builds), each distinct op (OpCostKey: everything the cost model reads of it) costed once: its
// standalone duration, the SMs and HBM bytes of a collective, the time of an SM-bound op on each SM count a
// collective leaves. A probe build shares most of its ops with the builds before it, so a search asks the
// cost model once per distinct op rather than once per op of every build.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "sim/engine/op_cost_key.hpp"
#include "sim/engine/simulator.hpp"

namespace domino {

class OpCostCache {
 public:
  OpCostCache(const CostModel& cost, int tp) : cost_(cost), tp_(tp) { grow(); }

  // op_costs(schedule, cost, options), equal to it bit for bit. Schedules that time their collectives over
  // another rank count than the cache's, or whose plan communicates nothing, bypass the cache.
  OpCosts op_costs(const Schedule& schedule, const SimOptions& options);
  size_t distinct_ops() const { return entries_.size(); }

 private:
  // What the cost model gives one distinct op; the contention facts on first use.
  struct Entry {
    OpCostKey key;
    double us = 0;         // CostModel::op_us
    int sms = -1;          // CostModel::collective_sms; -1 until asked
    double hbm_bytes = -1; // CostModel::collective_hbm_bytes; -1 until asked
    std::vector<std::pair<int, double>> on_sms;  // (SMs available, gemm_us_on_sms)
    uint32_t seen_in = 0;  // the last schedule (generation_) with an op of this entry
    int32_t first_op = 0;  // that schedule's first such op
  };
  class Facts;

  int32_t entry_of(const Op& op);  // finds or adds (then costs) the op's entry
  int32_t add_entry(const Op& op, const OpCostKey& key, size_t slot);  // the op costed, in table slot `slot`
  void grow();

  const CostModel& cost_;
  int tp_;
  std::vector<Entry> entries_;
  std::vector<int32_t> table_;  // open addressing: entry indices by OpCostKeyHash, -1 free
  std::vector<int32_t> entry_;  // per op of the schedule being costed
  uint32_t generation_ = 0;
};

}  // namespace domino
