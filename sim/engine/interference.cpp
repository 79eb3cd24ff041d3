// interference.cpp: the rates of two ops running together (interference.hpp), from the flat factors or
// from SM and HBM sharing on GPU profiles.
#include "sim/engine/interference.hpp"

#include <algorithm>
#include <array>
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

// The SMs a collective holds, worked out once per distinct (kind, bytes) of a schedule (its collectives come
// in few sizes; the cost model tries every algorithm per call), and the first alike of each SM-bound op.
class ScheduleFacts final : public ContentionFacts {
 public:
  ScheduleFacts(const Schedule& schedule, const CostModel& cost, int tp)
      : ops_(schedule.ops), cost_(cost), tp_(tp), dpn_(cost.profile().devices_per_node) {}
  int collective_sms(int32_t i) override {
    const Op& op = ops_[size_t(i)];
    for (const Known& k : known_)
      if (k.kind == op.kind && std::bit_cast<uint64_t>(k.bytes) == std::bit_cast<uint64_t>(op.bytes))
        return k.sms;
    known_.push_back({op.kind, op.bytes, cost_.collective_sms(op, tp_, dpn_)});
    return known_.back().sms;
  }
  double collective_hbm_bytes(int32_t i) override { return cost_.collective_hbm_bytes(ops_[size_t(i)], tp_); }
  // An open-addressing table of op indices by OpCostKey, its memory kept from one schedule to the next (one
  // per build of millions of probes).
  int32_t alike(int32_t i) override {
    std::vector<int32_t>& t = table();
    if (!table_ready_) {
      size_t size = 16;
      while (size < 2 * ops_.size()) size *= 2;
      t.assign(size, -1);
      table_ready_ = true;
    }
    const OpCostKey key(ops_[size_t(i)]);
    const size_t mask = t.size() - 1;
    for (size_t h = OpCostKeyHash()(key) & mask;; h = (h + 1) & mask) {
      if (t[h] < 0) {
        t[h] = i;
        return i;
      }
      if (OpCostKey(ops_[size_t(t[h])]) == key) return t[h];
    }
  }
  double us_on_sms(int32_t i, int sms_available) override { return cost_.gemm_us_on_sms(ops_[size_t(i)], sms_available); }

 private:
  static std::vector<int32_t>& table() {
    thread_local std::vector<int32_t> slots;
    return slots;
  }
  struct Known {
    OpKind kind;
    double bytes;
    int sms;
  };
  const std::vector<Op>& ops_;
  const CostModel& cost_;
  int tp_, dpn_;
  std::vector<Known> known_;
  bool table_ready_ = false;
};

}  // namespace

Interference::Interference(const Schedule& schedule, const CostModel& cost, int tp,
                           const std::vector<double>& duration) {
  ScheduleFacts facts(schedule, cost, tp);
  *this = Interference(schedule, cost, duration, facts);
}

Interference::Interference(const Schedule& schedule, const CostModel& cost, const std::vector<double>& duration,
                           ContentionFacts& facts) {
  if (!cost.models_sharing()) {
    const InterferenceProfile& flat = cost.profile().interference;
    flat_ = {flat.compute_rate(), flat.comm_rate_beside_held_op(0)};
    if (flat.comm_delay_during_compute_us > 0) flat_comm_rates(schedule, flat, duration);
    return;
  }
  mechanism_ = true;
  hbm_bytes_per_us_ = cost.hbm_bytes_per_us();
  const std::vector<Op>& ops = schedule.ops;
  const size_t n = ops.size();
  contends_.assign(n, Contends::Nothing);
  hbm_demand_.assign(n, 0.0);
  sms_slot_.assign(n, 0);
  // What each kind contends for, looked up per op (the tuner builds millions of these).
  std::array<Contends, kNumOpKinds> of_kind{};
  for (int k = 0; k < kNumOpKinds; ++k) {
    const OpKind kind = static_cast<OpKind>(k);
    of_kind[size_t(k)] = collective(kind)                                       ? Contends::Collective
                         : kind == OpKind::Gemm || kind == OpKind::Attention ? Contends::Sms
                         : memory_bound(kind)                                   ? Contends::Hbm
                                                                                : Contends::Nothing;
  }
  for (size_t i = 0; i < n; ++i) {
    const Op& op = ops[i];
    const Contends c = of_kind[static_cast<size_t>(op.kind)];
    contends_[i] = c;
    if (c == Contends::Collective) {
      sms_slot_[i] = slot_of(slot_sms_, facts.collective_sms(int32_t(i)));
      if (duration[i] > 0) hbm_demand_[i] = facts.collective_hbm_bytes(int32_t(i)) / duration[i];
    } else if (c == Contends::Hbm) {
      if (duration[i] > 0) hbm_demand_[i] = op.bytes / duration[i];
    }
  }
  // Every SM-bound op's rate beside each distinct collective: its standalone time over its time on the
  // SMs that collective leaves (the remaining work carries over at event boundaries).
  const size_t slots = slot_sms_.size();
  sms_rate_.assign(n * slots, 1.0);
  for (size_t i = 0; i < n; ++i) {
    if (contends_[i] != Contends::Sms || !(duration[i] > 0) || slots == 0) continue;
    const int32_t alike = facts.alike(int32_t(i));
    if (alike != int32_t(i)) {
      std::copy_n(sms_rate_.begin() + size_t(alike) * slots, slots, sms_rate_.begin() + i * slots);
      continue;
    }
    for (size_t s = 0; s < slots; ++s) {
      const double beside = facts.us_on_sms(int32_t(i), cost.sms() - slot_sms_[s]);
      if (beside > 0) sms_rate_[i * slots + s] = duration[i] / beside;
    }
  }
}

// The per-collective delay gives each collective, and the compute beside it, rates of their own.
void Interference::flat_comm_rates(const Schedule& schedule, const InterferenceProfile& flat,
                                   const std::vector<double>& duration) {
  const size_t n = schedule.ops.size();
  comm_rate_.assign(n, flat_[1]);
  compute_rate_.assign(n, flat_[0]);
  for (size_t i = 0; i < n; ++i)
    if (collective(schedule.ops[i].kind)) {
      comm_rate_[i] = flat.comm_rate_beside_held_op(duration[i]);
      compute_rate_[i] = flat.compute_rate_beside(duration[i]);
    }
}

Rates Interference::rates(int32_t compute_op, int32_t comm_op) const {
  if (!mechanism_)
    return comm_rate_.empty() ? flat_ : Rates{compute_rate_[size_t(comm_op)], comm_rate_[size_t(comm_op)]};
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
