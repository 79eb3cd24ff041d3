// toy_schedule.hpp: hand-built schedules whose timelines can be worked out on paper, and the profile that
// times them in round figures: memory and ring bus bandwidth 1e6 B/us, no launch cost, no collective latency
// (ring factor 1 at TP 2), so an op of D microseconds on either stream is one of D * 1e6 bytes.
#pragma once

#include <utility>
#include <vector>

#include "sim/cost/profile.hpp"
#include "sim/ir/schedule.hpp"

namespace domino::test {

inline Profile unit_bytes_profile() {
  Profile p;
  p.name = "unit";
  p.devices_per_node = 8;
  GemmProfile g;
  g.peak_tflops = 1;
  g.efficiency = {{1, 1}};
  p.gemm[static_cast<int>(DType::BF16)] = g;
  p.memory = {1000, 0, {}};
  p.attention.relative_efficiency = 1;
  p.intra_node = {0, 1000, {}, 0};
  return p;
}

// fp32 GEMMs from `table` (1 TFLOP/s peak and a flat efficiency of 0.5 elsewhere), memory at 100 GB/s, no
// launch cost, no interference.
inline Profile fp32_table_profile(std::vector<GemmTiming> table) {
  Profile p;
  p.name = "gemm table";
  p.devices_per_node = 4;
  GemmProfile g;
  g.peak_tflops = 1;
  g.efficiency = {{1, 0.5}};
  g.table = std::move(table);
  p.gemm[static_cast<int>(DType::FP32)] = g;
  p.memory = {100, 0, {}, {}};
  p.attention.relative_efficiency = 0.5;
  p.intra_node = {10, 1, {}, 0};
  p.interference = {0, 0};
  return p;
}

// A TP-2 schedule built op by op: compute ops element-wise, communication ops AllReduces, each of `us`
// microseconds under unit_bytes_profile().
struct ToySchedule {
  Schedule s;
  ToySchedule() {
    s.model.name = "toy";
    s.model.tp = 2;
    s.plan.tp = 2;
    s.plan.strategy = "hand-built";
  }
  int32_t compute(double us, std::vector<int32_t> deps = {}) { return add(Stream::Compute, us, std::move(deps)); }
  int32_t comm(double us, std::vector<int32_t> deps = {}) { return add(Stream::Comm, us, std::move(deps)); }
  // A GEMM of tiles_m x tiles_n tiles of 128 x 128 and k = 1024 (no bytes), for a profile with a gpu section.
  int32_t gemm(int64_t tiles_m, int64_t tiles_n) {
    Op& op = s.ops[compute(0)];
    op.kind = OpKind::Gemm;
    op.code = OpCode::MatMul;
    op.m = tiles_m * 128, op.n = tiles_n * 128, op.k = 1024;
    op.flops = 2.0 * op.m * op.n * op.k;
    return op.index;
  }
  int32_t norm(double us) {
    Op& op = s.ops[compute(us)];
    op.kind = OpKind::Norm;
    op.code = OpCode::LayerNormFwd;
    return op.index;
  }
  // An AllGather or ReduceScatter of D us (twice the bytes of an AllReduce of D us: it moves half of them).
  int32_t gather(OpKind kind, double us, std::vector<int32_t> deps = {}) {
    Op& op = s.ops[comm(us, std::move(deps))];
    op.kind = kind;
    op.code = kind == OpKind::AllGather ? OpCode::AllGather : OpCode::ReduceScatter;
    op.bytes *= 2;
    return op.index;
  }
  int32_t add(Stream st, double us, std::vector<int32_t> deps) {
    Op op;
    op.index = static_cast<int32_t>(s.ops.size());
    op.name = st == Stream::Comm ? "ar" : "work";
    op.slice = static_cast<int8_t>(op.index);  // unique ids
    op.stream = st;
    op.kind = st == Stream::Comm ? OpKind::AllReduce : OpKind::Elementwise;
    op.code = st == Stream::Comm ? OpCode::AllReduce : OpCode::ResidualAdd;
    op.bytes = us * 1e6;
    op.deps = std::move(deps);
    s.ops.push_back(op);
    return op.index;
  }
};

}  // namespace domino::test
