// cuda_sp_test.cpp: the CUDA backend's sequence-parallel ops on one GPU. The staging copies around an
// AllGather / ReduceScatter are checked through --emulate-comm (one GPU standing for the group: the gather
// fills every rank's rows with this rank's own, the scatter keeps this rank's partial sums), against the
// rows the shared geometry (executor/runtime/sp_collective.hpp) names, for batch and column sub-ranges, two
// groups, accumulate and a 16-bit type; PositionAdd on a sharded buffer against the CPU backend. Skips
// without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "executor/cpu/cpu_ops.hpp"
#include "executor/cuda/cuda_backend.hpp"
#include "executor/cuda/cuda_device_state.hpp"
#include "executor/runtime/sp_collective.hpp"

namespace domino {
namespace {

class CudaSp : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (cuda_device_count(&why) == 0) GTEST_SKIP() << "no CUDA device here (" << why << "): GPU tests skipped";
  }
};

// sharded [3, 4, 5] and full [3, 8, 6] buffers of a tp = 2 schedule; one op over batch [1, 3), both groups
// of g = 2, columns [1, 4) of the sharded and [2, 5) of the full buffer.
Schedule sp_schedule(OpCode code, DType dtype, bool accumulate) {
  Schedule s;
  s.model = default_model();
  s.model.tp = 2;
  s.model.dtype = dtype;
  for (const auto& [name, seq, cols] : {std::tuple{"sharded", 4, 5}, std::tuple{"full", 8, 6}}) {
    BufferDesc b;
    b.name = name, b.batch = 3, b.seq = seq, b.cols = cols;
    s.buffers.push_back(b);
  }
  const Region local{0, 1, 3, 0, 4, 1, 4}, full{1, 1, 3, 0, 8, 2, 5};
  Op op;
  op.name = "sp";
  op.code = code;
  op.kind = kind_of(code);
  op.stream = Stream::Comm;
  op.attrs.chunks = 2;
  op.attrs.accumulate = accumulate;
  op.in[0] = code == OpCode::AllGather ? local : full;
  op.out[0] = code == OpCode::AllGather ? full : local;
  op.n_in = op.n_out = 1;
  s.ops.push_back(op);
  return s;
}

// A device state whose memory goes back when the test ends, even after a failed assertion.
struct Device {
  cuda::DeviceState state;
  ~Device() { state.release(); }
};

// Values a 16-bit type holds exactly, so that the expected results need no rounding.
std::vector<float> exact_values(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = float(int(rng() % 64) - 32) / 8.0f;
  return v;
}

// Runs the schedule's op on one GPU standing for `rank` of the group; returns both buffers afterwards and,
// in *before, both before.
std::vector<std::vector<float>> run_emulated(const Schedule& s, int rank, std::vector<std::vector<float>>* before) {
  Device device;
  cuda::DeviceState& dev = device.state;
  dev.rank = rank;
  dev.options.emulate_comm = true;
  dev.options.emulate_tp = 2;
  dev.options.emulate_busbw_gbps = 1e6;
  dev.options.emulate_latency_us = 0;
  dev.allocate(s);
  for (int32_t b = 0; b < 2; ++b) {
    before->push_back(exact_values(s.buffers[size_t(b)].elements(), 11 + unsigned(b)));
    dev.upload(b, before->back());
  }
  cuda::run_op(dev, s.ops.front(), Stream::Comm);
  return {dev.download(whole_buffer(s, 0)), dev.download(whole_buffer(s, 1))};
}

// Element `col` of region row `row` of `r` in a dense copy of its whole buffer.
float& element(std::vector<float>& buf, const Schedule& s, const Region& r, int64_t row, int64_t col) {
  const BufferDesc& d = s.buffers[size_t(r.buffer)];
  const int64_t rows = r.s1 - r.s0, b = r.b0 + row / rows, q = r.s0 + row % rows;
  return buf[size_t((b * d.seq + q) * d.cols + r.c0 + col)];
}

TEST_F(CudaSp, EmulatedAllGatherPlacesEveryRanksRowsByGroup) {
  for (DType dtype : {DType::FP32, DType::BF16}) {
    const Schedule s = sp_schedule(OpCode::AllGather, dtype, false);
    std::vector<std::vector<float>> before;
    const std::vector<std::vector<float>> got = run_emulated(s, 1, &before);
    const SpCollectiveShape g = sp_collective_shape(s, s.ops[0], 2);
    std::vector<float> want = before[1];
    for (int r = 0; r < 2; ++r)  // every rank's block holds this rank's rows under emulation
      for (int64_t t = 0; t < g.local_rows(); ++t)
        for (int64_t c = 0; c < g.cols; ++c)
          element(want, s, g.full, g.full_row(r, t), c) = element(before[0], s, g.sharded, t, c);
    EXPECT_EQ(got[1], want) << to_string(dtype);
    EXPECT_EQ(got[0], before[0]) << "the sharded input changed";
  }
}

TEST_F(CudaSp, EmulatedReduceScatterKeepsThisRanksRowsAndAccumulates) {
  for (bool accumulate : {false, true}) {
    const Schedule s = sp_schedule(OpCode::ReduceScatter, DType::BF16, accumulate);
    std::vector<std::vector<float>> before;
    const int rank = 1;
    const std::vector<std::vector<float>> got = run_emulated(s, rank, &before);
    const SpCollectiveShape g = sp_collective_shape(s, s.ops[0], 2);
    std::vector<float> want = before[0];
    for (int64_t t = 0; t < g.local_rows(); ++t)
      for (int64_t c = 0; c < g.cols; ++c) {
        float& out = element(want, s, g.sharded, t, c);
        const float mine = element(before[1], s, g.full, g.full_row(rank, t), c);
        out = accumulate ? out + mine : mine;
      }
    EXPECT_EQ(got[0], want) << (accumulate ? "accumulate" : "overwrite");
  }
}

TEST_F(CudaSp, PositionAddOnAShardedBufferMatchesTheCpu) {
  Schedule s;
  s.model = default_model();
  s.model.tp = 2;
  s.model.dtype = DType::FP32;
  for (const auto& [name, batch, seq] : {std::tuple{"table", 1, 8}, std::tuple{"x", 2, 4}, std::tuple{"y", 2, 4}}) {
    BufferDesc b;
    b.name = name, b.batch = batch, b.seq = seq, b.cols = 3;
    s.buffers.push_back(b);
  }
  Op op;
  op.name = "pos";
  op.code = OpCode::PositionAdd;
  op.kind = kind_of(op.code);
  op.attrs.sp_groups = 2;
  op.in[0] = {1, 0, 2, 0, 4, 0, 3};
  op.in[1] = whole_buffer(s, 0);
  op.out[0] = {2, 0, 2, 0, 4, 0, 3};
  op.n_in = 2, op.n_out = 1;
  s.ops.push_back(op);
  for (int rank : {0, 1}) {
    std::vector<std::vector<float>> host;
    for (int32_t b = 0; b < 3; ++b) host.push_back(exact_values(s.buffers[size_t(b)].elements(), 3 + unsigned(b)));
    Device device;
    cuda::DeviceState& dev = device.state;
    dev.rank = rank;
    dev.allocate(s);
    for (int32_t b = 0; b < 3; ++b) dev.upload(b, host[size_t(b)]);
    cuda::run_op(dev, op, Stream::Compute);
    CpuOpContext cpu;
    cpu.schedule = &s;
    cpu.rank = rank;
    for (auto& b : host) cpu.buffers.push_back(b.data());
    run_cpu_op(op, cpu);
    EXPECT_EQ(dev.download(whole_buffer(s, 2)), host[2]) << "rank " << rank;
  }
}

}  // namespace
}  // namespace domino
