// interference.cpp: the rates of two ops running together (interference.hpp), from the flat factors or
// from SM and HBM sharing on GPU profiles.
#include "sim/engine/interference.hpp"

#include <algorithm>
#include <bit>

#include "sim/engine/op_cost_key.hpp"

namespace domino {

namespace {

// The index of `sms` in `slots`, appending it when new (a schedule's collectives hold few distinct counts).
int32_t slot_of(std::vector<int>& slots, int sms) {
  const auto it = std::find(slots.begin(), slots.end(), sms);
  if (it != slots.end()) return static_cast<int32_t>(it - slots.begin());
  slots.push_back(sms);
  return static_cast<int32_t>(slots.size() - 1);
}

// The SMs a collective of this kind and size holds, worked out once per distinct (kind, bytes) of a
// schedule (its collectives come in few sizes; the cost model tries every algorithm per call).
class CollectiveSms {
 public:
  CollectiveSms(const CostModel& cost, int tp, int devices_per_node)
      : cost_(cost), tp_(tp), dpn_(devices_per_node) {}
  int of(const Op& op) {
    for (const Known& k : known_)
      if (k.kind == op.kind && std::bit_cast<uint64_t>(k.bytes) == std::bit_cast<uint64_t>(op.bytes))
        return k.sms;
    known_.push_back({op.kind, op.bytes, cost_.collective_sms(op, tp_, dpn_)});
    return known_.back().sms;
  }

 private:
  struct Known {
    OpKind kind;
    double bytes;
    int sms;
  };
  const CostModel& cost_;
  int tp_, dpn_;
  std::vector<Known> known_;
};

// The first op of a schedule with the same OpCostKey as a given one: an open-addressing table of op
// indices, its memory kept from one schedule to the next (one per build of millions of probes).
class FirstAlike {
 public:
  explicit FirstAlike(size_t ops) {
    size_t size = 16;
    while (size < 2 * ops) size *= 2;
    table().assign(size, -1);
  }
  // The earliest op added with op i's key, or i itself (then added) when none.
  int32_t find_or_add(const std::vector<Op>& ops, int32_t i) {
    std::vector<int32_t>& t = table();
    const OpCostKey key(ops[size_t(i)]);
    const size_t mask = t.size() - 1;
    for (size_t h = OpCostKeyHash()(key) & mask;; h = (h + 1) & mask) {
      if (t[h] < 0) {
        t[h] = i;
        return i;
      }
      if (OpCostKey(ops[size_t(t[h])]) == key) return t[h];
    }
  }

 private:
  static std::vector<int32_t>& table() {
    thread_local std::vector<int32_t> slots;
    return slots;
  }
};

}  // namespace

Interference::Interference(const Schedule& schedule, const CostModel& cost, int tp,
                           const std::vector<double>& duration) {
  if (!cost.models_sharing()) {
    flat_ = {1.0 / (1.0 + cost.compute_slowdown()), 1.0 / (1.0 + cost.comm_slowdown())};
    return;
  }
  mechanism_ = true;
  hbm_bytes_per_us_ = cost.hbm_bytes_per_us();
  const std::vector<Op>& ops = schedule.ops;
  const size_t n = ops.size();
  const int devices_per_node = cost.profile().devices_per_node;
  contends_.assign(n, Contends::Nothing);
  hbm_demand_.assign(n, 0.0);
  sms_slot_.assign(n, 0);
  CollectiveSms collective_sms(cost, tp, devices_per_node);
  for (size_t i = 0; i < n; ++i) {
    const Op& op = ops[i];
    if (collective(op.kind)) {
      contends_[i] = Contends::Collective;
      sms_slot_[i] = slot_of(slot_sms_, collective_sms.of(op));
      if (duration[i] > 0) hbm_demand_[i] = cost.collective_hbm_bytes(op, tp) / duration[i];
    } else if (op.kind == OpKind::Gemm || op.kind == OpKind::Attention) {
      contends_[i] = Contends::Sms;
    } else if (memory_bound(op.kind)) {
      contends_[i] = Contends::Hbm;
      if (duration[i] > 0) hbm_demand_[i] = op.bytes / duration[i];
    }
  }
  // Every SM-bound op's rate beside each distinct collective: its standalone time over its time on the
  // SMs that collective leaves (the remaining work carries over at event boundaries).
  const size_t slots = slot_sms_.size();
  sms_rate_.assign(n * slots, 1.0);
  FirstAlike first_alike(n);
  for (size_t i = 0; i < n; ++i) {
    if (contends_[i] != Contends::Sms || !(duration[i] > 0) || slots == 0) continue;
    const int32_t alike = first_alike.find_or_add(ops, int32_t(i));
    if (alike != int32_t(i)) {
      std::copy_n(sms_rate_.begin() + size_t(alike) * slots, slots, sms_rate_.begin() + i * slots);
      continue;
    }
    for (size_t s = 0; s < slots; ++s) {
      const double beside = cost.gemm_us_on_sms(ops[i], cost.sms() - slot_sms_[s]);
      if (beside > 0) sms_rate_[i * slots + s] = duration[i] / beside;
    }
  }
}

Rates Interference::rates(int32_t compute_op, int32_t comm_op) const {
  if (!mechanism_) return flat_;
  if (contends_[comm_op] != Contends::Collective) return {1.0, 1.0};
  switch (contends_[compute_op]) {
    case Contends::Sms: return {sms_rate_[size_t(compute_op) * slot_sms_.size() + sms_slot_[comm_op]], 1.0};
    case Contends::Hbm: {
      // Both stream through HBM: past its bandwidth each gets its share in proportion to its demand.
      const double demand = hbm_demand_[compute_op] + hbm_demand_[comm_op];
      const double share = demand > hbm_bytes_per_us_ ? hbm_bytes_per_us_ / demand : 1.0;
      return {share, share};
    }
    case Contends::Nothing:
    case Contends::Collective: break;
  }
  return {1.0, 1.0};
}

}  // namespace domino
