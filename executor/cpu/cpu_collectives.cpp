// cpu_collectives.cpp: AllReduce, AllGather and ReduceScatter on the CPU (see cpu_collectives.hpp). Rows are
// copied between the strided regions and the staging array one row at a time (a row is contiguous in a
// buffer); the collectives themselves are Gloo's.
#include "executor/cpu/cpu_collectives.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "executor/cpu/cpu_views.hpp"
#include "executor/runtime/gloo_comm.hpp"
#include "executor/runtime/sp_collective.hpp"
#include "sim/base/error.hpp"

namespace domino {
namespace {

std::string rank_prefix(const CpuCollectiveContext& c) { return "rank " + std::to_string(c.ops->rank) + ": "; }

// A ring collective takes `hops` dependent link traversals: the emulated link's latency for each.
void sleep_for_hops(const CpuCollectiveContext& c, int hops) {
  if (c.link_latency_us > 0 && hops > 0)
    std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(c.link_latency_us * hops));
}

void copy_row(float* dst, const float* src, int64_t cols) { std::memcpy(dst, src, size_t(cols) * sizeof(float)); }

void all_reduce(const Op& op, const CpuCollectiveContext& c, float* staging) {
  if (c.world == 1) return;  // a group of one: the sum is the input
  if (op.n_in < 1 || !op.in[0].valid())
    throw_runtime(rank_prefix(c) + op_id(op) + ": AllReduce without a region");
  sleep_for_hops(c, 2 * (c.world - 1));
  const Region& r = op.in[0];
  const BufferDesc& b = c.ops->schedule->buffers.at(size_t(r.buffer));
  const cpu::View v = cpu::view_of(*c.ops, r);
  const auto reduce = [&](float* data, size_t n) {
    c.comm->allreduce(data, n, op.attrs.reduce, uint32_t(op.index), op_id(op));
  };
  if (region_contiguous(b, r)) return reduce(v.base, size_t(r.elements()));
  for (int64_t row = 0; row < v.rows; ++row) copy_row(staging + row * v.cols, v.row(row), v.cols);
  reduce(staging, size_t(r.elements()));
  for (int64_t row = 0; row < v.rows; ++row) copy_row(v.row(row), staging + row * v.cols, v.cols);
}

// The geometry, on a group that holds the schedule's TP degree (a collective of tp ranks needs all of them).
SpCollectiveShape checked_shape(const Op& op, const CpuCollectiveContext& c) {
  const Schedule& s = *c.ops->schedule;
  const SpCollectiveShape g = sp_collective_shape(s, op, s.model.tp);
  if (g.tp != c.world || (c.world > 1 && !c.comm))
    throw_runtime(rank_prefix(c) + op_id(op) + ": a " + to_string(op.code) + " over the " + std::to_string(g.tp) +
                  " ranks of the schedule's TP group runs on a group of " + std::to_string(c.world));
  return g;
}

// Staging: rank after rank, each rank's local rows of the op's groups (sp_collective.hpp). The library
// collective runs in place on it.
void all_gather(const Op& op, const CpuCollectiveContext& c, float* staging) {
  const SpCollectiveShape g = checked_shape(op, c);
  const cpu::View local = cpu::view_of(*c.ops, g.sharded), full = cpu::view_of(*c.ops, g.full);
  const int64_t rows = g.local_rows();
  float* mine = staging + c.ops->rank * g.local_elements();
  for (int64_t t = 0; t < rows; ++t) copy_row(mine + t * g.cols, local.row(t), g.cols);
  if (c.world > 1) {
    sleep_for_hops(c, c.world - 1);
    c.comm->allgather(staging, size_t(g.local_elements()), uint32_t(op.index), op_id(op));
  }
  for (int r = 0; r < g.tp; ++r)
    for (int64_t t = 0; t < rows; ++t) copy_row(full.row(g.full_row(r, t)), staging + (r * rows + t) * g.cols, g.cols);
}

// The op's Gloo reduce-scatter, set up on first use (set_up_cpu_collectives sets them all up beforehand).
GlooReduceScatter& reduce_scatter_of(const Op& op, const SpCollectiveShape& g, const CpuCollectiveContext& c,
                                     CpuCollectiveState& state) {
  std::unique_ptr<GlooReduceScatter>& rs = state.reduce_scatters[op.index];
  if (!rs) rs = c.comm->reduce_scatter_sum(state.staging.data(), size_t(g.local_elements()), op_id(op));
  return *rs;
}

void reduce_scatter(const Op& op, const CpuCollectiveContext& c, CpuCollectiveState& state) {
  const SpCollectiveShape g = checked_shape(op, c);
  float* staging = state.staging.data();
  const cpu::View local = cpu::view_of(*c.ops, g.sharded), full = cpu::view_of(*c.ops, g.full);
  const int64_t rows = g.local_rows();
  for (int r = 0; r < g.tp; ++r)
    for (int64_t t = 0; t < rows; ++t) copy_row(staging + (r * rows + t) * g.cols, full.row(g.full_row(r, t)), g.cols);
  if (c.world > 1) {
    GlooReduceScatter& rs = reduce_scatter_of(op, g, c, state);
    sleep_for_hops(c, c.world - 1);
    rs.run(op_id(op));
  }
  // One rank's sums arrive in the first block (on a group of one: the block is this rank's own rows).
  for (int64_t t = 0; t < rows; ++t) {
    const float* sum = staging + t * g.cols;
    if (op.attrs.accumulate) local.row_array(t) += Eigen::Map<const Eigen::Array<float, 1, Eigen::Dynamic>>(sum, g.cols);
    else copy_row(local.row(t), sum, g.cols);
  }
}

}  // namespace

int64_t collective_staging_floats(const Schedule& schedule, Stream stream) {
  int64_t most = 0;
  for (const Op& op : schedule.ops) {
    if (op.stream != stream || op.n_in < 1 || op.n_out < 1) continue;
    if (op.code == OpCode::AllReduce && op.in[0].valid() &&
        !region_contiguous(schedule.buffers.at(size_t(op.in[0].buffer)), op.in[0]))
      most = std::max(most, op.in[0].elements());
    if (op.code == OpCode::AllGather) most = std::max(most, op.out[0].elements());
    if (op.code == OpCode::ReduceScatter) most = std::max(most, op.in[0].elements());
  }
  return most;
}

CpuCollectiveState::CpuCollectiveState(int64_t staging_floats) : staging(size_t(staging_floats)) {}
CpuCollectiveState::~CpuCollectiveState() = default;

void set_up_cpu_collectives(const Schedule& schedule, Stream stream, const CpuCollectiveContext& c,
                            CpuCollectiveState& state) {
  if (c.world == 1) return;
  for (const Op& op : schedule.ops)
    if (op.stream == stream && op.code == OpCode::ReduceScatter)
      reduce_scatter_of(op, checked_shape(op, c), c, state);
}

void run_cpu_collective(const Op& op, const CpuCollectiveContext& c, CpuCollectiveState& state) {
  switch (op.code) {
    case OpCode::AllReduce: return all_reduce(op, c, state.staging.data());
    case OpCode::AllGather: return all_gather(op, c, state.staging.data());
    case OpCode::ReduceScatter: return reduce_scatter(op, c, state);
    default: throw_runtime(rank_prefix(c) + op_id(op) + ": " + to_string(op.code) + " is not a collective");
  }
}

}  // namespace domino
