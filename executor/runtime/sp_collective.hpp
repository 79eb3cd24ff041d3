// sp_collective.hpp: the row geometry of a sequence-parallel AllGather or ReduceScatter op (sim/ir/schedule.hpp,
// SpLayout), and the positions of a PositionAdd on a sequence-sharded buffer, shared by every backend. Both collectives exchange one contiguous "staging" array laid out as
// NCCL and Gloo want it, rank after rank: [rank][batch][group][t][cols], where rank r's block holds its local
// rows of the op's groups in region order. Backends pack a strided region into that layout, run the library's
// collective on it and unpack; this file says which region row each staged row belongs to.
#pragma once

#include <cstdint>

#include "sim/ir/schedule.hpp"

namespace domino {

struct SpCollectiveShape {
  Region sharded;          // this rank's rows of the groups: AllGather in[0], ReduceScatter out[0]
  Region full;             // every rank's rows of the groups: AllGather out[0], ReduceScatter in[0]
  int tp = 1;              // ranks the sequence is sharded over
  int64_t batches = 0;     // batch entries of both regions
  int64_t groups = 0;      // whole groups covered (attrs.chunks)
  int64_t part = 0;        // rows of one group one rank holds (S / (g tp))
  int64_t group_rows = 0;  // rows of one group in the full region (S / g = tp * part)
  int64_t cols = 0;

  int64_t local_rows() const { return batches * groups * part; }
  int64_t local_elements() const { return local_rows() * cols; }
  int64_t full_elements() const { return local_elements() * tp; }
  // The row of the full region (region order: batch-major, then seq) that holds staged row `t` of `rank`'s
  // block, t in [0, local_rows()); the same t is row t of the sharded region.
  int64_t full_row(int rank, int64_t t) const {
    const int64_t b = t / (groups * part), in_batch = t % (groups * part);
    return b * groups * group_rows + (in_batch / part) * group_rows + int64_t(rank) * part + in_batch % part;
  }
};

// The geometry of `op` (an AllGather or ReduceScatter) for a group of `tp` ranks, derived from its regions and
// attrs.chunks as the IR's contract says: S/g = full seq length / n, part = sharded seq length / n, and
// S/g == tp * part. Throws a runtime Error naming the op when the regions do not fit that contract (a
// malformed schedule must fail here, before any byte moves).
SpCollectiveShape sp_collective_shape(const Schedule& schedule, const Op& op, int tp);

// The layout of the rows a PositionAdd with attrs.sp_groups = g > 0 adds positions to: SpLayout{seq = S, the
// positional table's rows, groups = g, tp = the schedule's TP degree}; local row t of rank r (its seq index in
// the sharded buffer) takes the table row layout.position(r, t). Throws a runtime Error naming the op unless
// g * tp divides S, the op's table region covers the whole table and its rows lie within one rank's S / tp.
SpLayout sp_position_layout(const Schedule& schedule, const Op& op);

}  // namespace domino
