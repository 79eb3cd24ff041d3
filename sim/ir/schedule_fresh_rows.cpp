// schedule_fresh_rows.cpp: which bytes of a memory-bound op a collective has just written on the op's own
// core. A collective that runs on a staging array (a ReduceScatter, an AllGather, an AllReduce of a strided
// region) ends by copying its result row by row into the op's buffers on the rank's communication thread,
// which the CPU backend keeps on the compute thread's core. When the compute stream has nothing to run
// between the collective's start and the op (the collective waits for the compute op right before it, and the
// op waits for the collective), those rows are the last thing the core wrote: the op finds them in cache if
// they fit. Under sequence parallelism the residual add works in place on the rows its ReduceScatter filled
// and ran 1.6-2.2 times faster than its bytes at the cold bandwidth (docs/fidelity.md, "Rows a collective has
// just written"). Whether they fit is the profile's to say (MemoryProfile::cache_bytes); here only the facts.
#include <algorithm>
#include <utility>

#include "sim/ir/schedule_builder_internal.hpp"

namespace domino::detail {
namespace {

int64_t shared_elements(const Region& a, const Region& b) {
  if (a.buffer != b.buffer || !a.valid()) return 0;
  const auto extent = [](int64_t lo0, int64_t hi0, int64_t lo1, int64_t hi1) {
    return std::max<int64_t>(0, std::min(hi0, hi1) - std::max(lo0, lo1));
  };
  return extent(a.b0, a.b1, b.b0, b.b1) * extent(a.s0, a.s1, b.s0, b.s1) * extent(a.c0, a.c1, b.c0, b.c1);
}

// The region a collective leaves its result in, when it copies that result out of a staging array; else
// none (an AllReduce of a contiguous region reduces in place, its last bytes arriving through the socket).
const Region* copied_out(const Schedule& s, const Op& c) {
  if (c.n_out < 1 || !c.out[0].valid()) return nullptr;
  if (c.code == OpCode::ReduceScatter || c.code == OpCode::AllGather) return &c.out[0];
  if (c.code != OpCode::AllReduce) return nullptr;
  return region_contiguous(s.buffers[size_t(c.out[0].buffer)], c.out[0]) ? nullptr : &c.out[0];
}

double bytes_of(const Schedule& s, const Region& r, int64_t elements) {
  return double(elements) * element_bytes(s.buffers[size_t(r.buffer)], dtype_bytes(s.model.dtype));
}

// The bytes of op's operands in `rows`, counted as fill_costs counts op.bytes (an operand read and written
// counts twice).
double bytes_in(const Schedule& s, const Op& op, const Region& rows) {
  double bytes = 0;
  for (int i = 0; i < op.n_in; ++i) bytes += bytes_of(s, rows, shared_elements(op.in[size_t(i)], rows));
  for (int i = 0; i < op.n_out; ++i) bytes += bytes_of(s, rows, shared_elements(op.out[size_t(i)], rows));
  return bytes;
}

}  // namespace

void mark_fresh_rows(Schedule& s) {
  int32_t compute_before = -1;  // the compute op before the current one in program order
  for (Op& op : s.ops) {
    if (op.stream != Stream::Compute) continue;
    const int32_t before = std::exchange(compute_before, op.index);
    op.fresh_bytes = op.fresh_from_bytes = 0;
    if (!memory_bound(op.kind) || before < 0) continue;
    for (const int32_t d : op.deps) {
      const Op& c = s.ops[size_t(d)];
      const Region* rows = collective(c.kind) ? copied_out(s, c) : nullptr;
      // Deps are ascending and all on the compute stream: the last is the compute op the collective waits
      // for.
      if (!rows || c.deps.empty() || c.deps.back() != before) continue;
      const double fresh = bytes_in(s, op, *rows);
      if (fresh > op.fresh_bytes) {
        op.fresh_bytes = std::min(fresh, op.bytes);
        op.fresh_from_bytes = bytes_of(s, *rows, rows->elements());
      }
    }
  }
}

}  // namespace domino::detail
