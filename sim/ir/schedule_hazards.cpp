// schedule_hazards.cpp: cross-stream dependencies from data hazards on buffer regions. Walking the ops in
// program order, a read waits for earlier writers of an overlapping region on the other stream, a write
// for earlier writers and readers there. Same-stream order is implicit (streams run in program order),
// so only cross-stream edges are recorded; only buffers both streams touch can produce one.
#include <algorithm>

#include "sim/ir/schedule_builder_internal.hpp"

namespace domino::detail {
namespace {

struct Access {
  int32_t op;
  Stream stream;
  bool write;
  Region r;
};

bool overlaps(const Region& a, const Region& b) {
  return a.b0 < b.b1 && b.b0 < a.b1 && a.s0 < b.s1 && b.s0 < a.s1 && a.c0 < b.c1 && b.c0 < a.c1;
}

bool contains(const Region& outer, const Region& inner) {
  return outer.b0 <= inner.b0 && inner.b1 <= outer.b1 && outer.s0 <= inner.s0 && inner.s1 <= outer.s1 &&
         outer.c0 <= inner.c0 && inner.c1 <= outer.c1;
}

}  // namespace

void add_hazard_deps(Schedule& s) {
  const size_t nb = s.buffers.size();
  // Buffers touched by more than one stream; accesses to the others can never need an edge.
  std::vector<uint8_t> streams(nb, 0);
  for (const Op& op : s.ops) {
    const uint8_t bit = uint8_t(1u << int(op.stream));
    for (int i = 0; i < op.n_in; ++i) streams[size_t(op.in[size_t(i)].buffer)] |= bit;
    for (int i = 0; i < op.n_out; ++i) streams[size_t(op.out[size_t(i)].buffer)] |= bit;
  }
  std::vector<std::vector<Access>> history(nb);
  std::vector<int32_t> deps;
  for (Op& op : s.ops) {
    deps.clear();
    const auto shared = [&](const Region& r) { return streams[size_t(r.buffer)] == 3; };
    for (int i = 0; i < op.n_in; ++i) {
      const Region& r = op.in[size_t(i)];
      if (!shared(r)) continue;
      for (const Access& a : history[size_t(r.buffer)]) {
        if (a.write && a.stream != op.stream && overlaps(a.r, r)) deps.push_back(a.op);
      }
    }
    for (int i = 0; i < op.n_out; ++i) {
      const Region& r = op.out[size_t(i)];
      if (!shared(r)) continue;
      for (const Access& a : history[size_t(r.buffer)]) {
        if (a.stream != op.stream && overlaps(a.r, r)) deps.push_back(a.op);
      }
    }
    for (int i = 0; i < op.n_in; ++i) {
      const Region& r = op.in[size_t(i)];
      if (shared(r)) history[size_t(r.buffer)].push_back(Access{op.index, op.stream, false, r});
    }
    for (int i = 0; i < op.n_out; ++i) {
      const Region& r = op.out[size_t(i)];
      if (!shared(r)) continue;
      // Accesses inside the newly written region are ordered before this write (by stream order or by the
      // edges just added), so any later conflict with them is also a conflict with this write: forget them.
      auto& h = history[size_t(r.buffer)];
      h.erase(std::remove_if(h.begin(), h.end(), [&](const Access& a) { return contains(r, a.r); }), h.end());
      h.push_back(Access{op.index, op.stream, true, r});
    }
    if (deps.empty() && op.deps.empty()) continue;
    op.deps.insert(op.deps.end(), deps.begin(), deps.end());
    std::sort(op.deps.begin(), op.deps.end());
    op.deps.erase(std::unique(op.deps.begin(), op.deps.end()), op.deps.end());
  }
}

}  // namespace domino::detail
