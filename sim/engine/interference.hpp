// interference.hpp: how fast the two running ops progress while both streams are busy. Profiles without
// a gpu section: flat slowdown factors, and a collective's delay beside compute as a rate of its own per
// collective (InterferenceProfile::comm_rate). GPU profiles: a mechanism. A running collective (AllReduce,
// AllGather, ReduceScatter) holds SMs, so a GEMM or attention op beside it runs its tiles in waves over the
// SMs left; memory-bound ops and the collective share HBM bandwidth in proportion to their demand.
// Everything per op is precomputed once per schedule, so rates() allocates nothing (the tuner calls it at
// every event of millions of simulations).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sim/cost/cost_model.hpp"
#include "sim/ir/schedule.hpp"

namespace domino {

// Work done per microsecond, in microseconds of the op's standalone duration, per stream.
using Rates = std::array<double, kNumStreams>;

// What the rates need of a schedule's ops beyond their durations, as the cost model gives it: worked out per
// schedule (Interference's own), or kept across schedules (OpCostCache).
class ContentionFacts {
 public:
  virtual ~ContentionFacts() = default;
  virtual int collective_sms(int32_t op) = 0;          // CostModel::collective_sms
  virtual double collective_hbm_bytes(int32_t op) = 0; // CostModel::collective_hbm_bytes
  // An earlier op of the schedule that costs the same as `op` on any SM count (its rates are copied), or op.
  virtual int32_t alike(int32_t op) = 0;
  virtual double us_on_sms(int32_t op, int sms_available) = 0;  // CostModel::gemm_us_on_sms
};

class Interference {
 public:
  // duration: every op's standalone duration (the simulator's); tp: ranks of each collective.
  Interference(const Schedule& schedule, const CostModel& cost, int tp, const std::vector<double>& duration);
  // The same rates from facts given elsewhere (those of this schedule's ops under this cost model and tp).
  Interference(const Schedule& schedule, const CostModel& cost, const std::vector<double>& duration,
               ContentionFacts& facts);

  // Rates of the compute-stream op and the comm-stream op running together.
  Rates rates(int32_t compute_op, int32_t comm_op) const;
  // Of the time a comm-stream op spends beside compute, the share its per-collective delay takes (flat
  // profiles with comm_delay_during_compute_us; else 0): what it would move in that time at the rate without
  // the delay, it moves in (1 - share) of it.
  double delay_share(int32_t comm_op) const {
    return comm_rate_.empty() ? 0.0 : 1.0 - comm_rate_[size_t(comm_op)] / flat_[1];
  }

 private:
  enum class Contends : uint8_t { Nothing, Sms, Hbm, Collective };
  void flat_comm_rates(const Schedule& schedule, const InterferenceProfile& flat,
                       const std::vector<double>& duration);

  bool mechanism_ = false;
  Rates flat_{1.0, 1.0};
  std::vector<double> comm_rate_;     // flat profiles with a per-collective delay: each comm op's rate,
  std::vector<double> compute_rate_;  // and the rate of a compute op beside it
  std::vector<Contends> contends_;
  std::vector<double> hbm_demand_;     // Hbm and Collective ops: bytes per microsecond when alone
  std::vector<int32_t> sms_slot_;      // Collective ops: index into slot_sms_
  std::vector<int> slot_sms_;          // the distinct SM counts the schedule's collectives hold
  std::vector<double> sms_rate_;       // Sms ops: rate beside a collective of each slot, [op * slots + slot]
  double hbm_bytes_per_us_ = 0;
};

}  // namespace domino
