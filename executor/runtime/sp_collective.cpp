// sp_collective.cpp: the geometry of an AllGather / ReduceScatter op and its checks (see sp_collective.hpp).
#include "executor/runtime/sp_collective.hpp"

#include <fmt/format.h>

#include <string>

#include "sim/base/error.hpp"

namespace domino {
namespace {

// "" when the region lies inside its buffer and is not empty.
std::string region_problem(const Schedule& s, const Region& r, const char* what) {
  if (r.buffer < 0 || size_t(r.buffer) >= s.buffers.size()) return fmt::format("{} names no buffer", what);
  const BufferDesc& b = s.buffers[size_t(r.buffer)];
  const bool inside = 0 <= r.b0 && r.b0 < r.b1 && r.b1 <= b.batch && 0 <= r.s0 && r.s0 < r.s1 && r.s1 <= b.seq &&
                      0 <= r.c0 && r.c0 < r.c1 && r.c1 <= b.cols;
  if (!inside)
    return fmt::format("{} [{},{})x[{},{})x[{},{}) is empty or outside buffer '{}' [{}, {}, {}]", what, r.b0, r.b1,
                       r.s0, r.s1, r.c0, r.c1, b.name, b.batch, b.seq, b.cols);
  return "";
}

std::string shape_problem(const Schedule& s, const Op& op, int tp, SpCollectiveShape* out) {
  if (op.code != OpCode::AllGather && op.code != OpCode::ReduceScatter) return "is not an AllGather or ReduceScatter";
  if (op.n_in != 1 || op.n_out != 1) return fmt::format("has {} inputs and {} outputs (needs 1 and 1)", op.n_in, op.n_out);
  const bool gather = op.code == OpCode::AllGather;
  for (const auto& [r, what] : {std::pair{op.in[0], "in[0]"}, std::pair{op.out[0], "out[0]"}})
    if (std::string p = region_problem(s, r, what); !p.empty()) return p;
  if (!gather && op.attrs.reduce != ReduceOp::Sum) return "reduces with something other than a sum";
  if (tp < 1) return fmt::format("runs on a group of {} ranks", tp);
  const int64_t n = op.attrs.chunks;
  if (n < 1) return fmt::format("covers {} groups (attrs.chunks must be at least 1)", n);
  SpCollectiveShape g;
  g.sharded = gather ? op.in[0] : op.out[0];
  g.full = gather ? op.out[0] : op.in[0];
  g.tp = tp;
  g.groups = n;
  g.batches = g.sharded.b1 - g.sharded.b0;
  g.cols = g.sharded.cols();
  const int64_t local_seq = g.sharded.s1 - g.sharded.s0, full_seq = g.full.s1 - g.full.s0;
  if (g.full.b1 - g.full.b0 != g.batches || g.full.cols() != g.cols)
    return fmt::format("has a sharded region of {} batch entries x {} columns but a full one of {} x {}", g.batches,
                       g.cols, g.full.b1 - g.full.b0, g.full.cols());
  if (local_seq % n != 0 || full_seq % n != 0)
    return fmt::format("covers {} groups, which divide neither its local rows ({}) nor its full rows ({})", n,
                       local_seq, full_seq);
  g.part = local_seq / n;
  g.group_rows = full_seq / n;
  if (g.group_rows != int64_t(tp) * g.part)
    return fmt::format("has groups of {} full rows but {} local rows per rank on {} ranks (needs {} = tp x {})",
                       g.group_rows, g.part, tp, int64_t(tp) * g.part, g.part);
  *out = g;
  return "";
}

std::string position_problem(const Schedule& s, const Op& op, SpLayout* out) {
  if (op.code != OpCode::PositionAdd || op.attrs.sp_groups <= 0) return "is not a PositionAdd on a sharded buffer";
  if (op.n_in < 2 || op.n_out < 1) return "has no positional table";
  for (const auto& [r, what] : {std::pair{op.in[0], "in[0]"}, std::pair{op.in[1], "positional table"}})
    if (std::string p = region_problem(s, r, what); !p.empty()) return p;
  const Region& table = op.in[1];
  const SpLayout layout{s.buffers[size_t(table.buffer)].seq, op.attrs.sp_groups, s.model.tp};
  if (layout.tp < 1 || layout.seq % (layout.groups * layout.tp) != 0)
    return fmt::format("shards a sequence of {} positions into {} groups over {} ranks, which do not divide it",
                       layout.seq, layout.groups, layout.tp);
  if (table.s0 != 0 || table.s1 != layout.seq || table.b1 - table.b0 != 1)
    return fmt::format("reads positions [{},{}) of a table of {}: a sharded buffer needs the whole table", table.s0,
                       table.s1, layout.seq);
  if (op.in[0].s1 > layout.local_rows())
    return fmt::format("adds positions to local rows up to {}, beyond the {} rows one rank holds", op.in[0].s1,
                       layout.local_rows());
  *out = layout;
  return "";
}

}  // namespace

SpLayout sp_position_layout(const Schedule& schedule, const Op& op) {
  SpLayout layout;
  if (const std::string problem = position_problem(schedule, op, &layout); !problem.empty())
    throw_runtime(fmt::format("op {} (#{}) {}", op_id(op), op.index, problem));
  return layout;
}

SpCollectiveShape sp_collective_shape(const Schedule& schedule, const Op& op, int tp) {
  SpCollectiveShape g;
  if (const std::string problem = shape_problem(schedule, op, tp, &g); !problem.empty())
    throw_runtime(fmt::format("op {} (#{}) {}", op_id(op), op.index, problem));
  return g;
}

}  // namespace domino
