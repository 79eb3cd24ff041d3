// collective_profiles.hpp: the toy profile and ops the collective tests share (collective_algorithms_test,
// sp_collectives_test): one level with a ring and an NVLS AllReduce curve, an inter-node ring, and a
// collective op of any kind. Figures are round so that the tests can derive their times by hand.
#pragma once

#include "sim/cost/profile.hpp"
#include "sim/ir/schedule.hpp"

namespace domino::test {

// Ring: 10 us + 100 GB/s, 24 SMs. NVLS: 30 us + 200 GB/s, 16 SMs, from 5 ranks. Over 8 ranks a message of
// S bytes moves 1.75 S per rank: ring 10 + 1.75 S / 1e5 us, NVLS 30 + 1.75 S / 2e5 us (S in bytes); they
// cross where 1.75 S / 2e5 = 20, S = 2 285 714 bytes.
inline Profile two_algorithm_profile() {
  Profile p;
  p.name = "toy";
  p.devices_per_node = 8;
  GemmProfile g;
  g.peak_tflops = 100;
  g.efficiency = {{1, 0.5}};
  p.gemm[static_cast<int>(DType::BF16)] = g;
  p.memory = {1000, 2, {}};
  p.attention.relative_efficiency = 0.5;
  p.intra_node.latency_us = 10;
  p.intra_node.bus_bandwidth_gbps = 100;
  p.intra_node.ring_sms = 24;
  p.intra_node.nvls = CollectiveCurve{30, 200, {}, 16, 5};
  CollectiveProfile inter;
  inter.latency_us = 40;
  inter.bus_bandwidth_gbps = 50;
  inter.ring_sms = 8;
  p.inter_node = inter;
  p.interference = {0.15, 0.05};
  return p;
}

// A collective op of `kind` of `bytes` (the gathered buffer for AllGather and ReduceScatter).
inline Op collective_op(OpKind kind, double bytes) {
  Op op;
  op.kind = kind;
  op.code = kind == OpKind::AllGather       ? OpCode::AllGather
            : kind == OpKind::ReduceScatter ? OpCode::ReduceScatter
                                            : OpCode::AllReduce;
  op.stream = Stream::Comm;
  op.bytes = bytes;
  return op;
}

inline Op allreduce_op(double bytes) { return collective_op(OpKind::AllReduce, bytes); }

}  // namespace domino::test
