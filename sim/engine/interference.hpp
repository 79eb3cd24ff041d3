// interference.hpp: how fast the two running ops progress while both streams are busy. Profiles without
// a gpu section: flat slowdown factors. GPU profiles: a mechanism. A running collective (AllReduce,
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

class Interference {
 public:
  // duration: every op's standalone duration (the simulator's); tp: ranks of each collective.
  Interference(const Schedule& schedule, const CostModel& cost, int tp, const std::vector<double>& duration);

  // Rates of the compute-stream op and the comm-stream op running together.
  Rates rates(int32_t compute_op, int32_t comm_op) const;

 private:
  enum class Contends : uint8_t { Nothing, Sms, Hbm, Collective };

  bool mechanism_ = false;
  Rates flat_{1.0, 1.0};
  std::vector<Contends> contends_;
  std::vector<double> hbm_demand_;     // Hbm and Collective ops: bytes per microsecond when alone
  std::vector<int32_t> sms_slot_;      // Collective ops: index into slot_sms_
  std::vector<int> slot_sms_;          // the distinct SM counts the schedule's collectives hold
  std::vector<double> sms_rate_;       // Sms ops: rate beside a collective of each slot, [op * slots + slot]
  double hbm_bytes_per_us_ = 0;
};

}  // namespace domino
