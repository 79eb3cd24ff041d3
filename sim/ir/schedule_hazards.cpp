// schedule_hazards.cpp: cross-stream dependencies from data hazards on buffer regions. Walking the ops in
// program order, a read waits for earlier writers of an overlapping region on the other stream, a write
// for earlier writers and readers there. Same-stream order is implicit (streams run in program order),
// so only cross-stream edges are recorded; only buffers both streams touch can produce one.
#include <algorithm>
#include <array>

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

// The access histories of the buffers both streams touch, one per such buffer. The tuner builds thousands
// of schedules in a row: the lists keep their capacity from one build to the next (per thread), so a
// build allocates none once they have grown.
class Histories {
 public:
  // slot[b]: the history of buffer b, -1 for buffers only one stream touches.
  std::vector<int32_t> slot;

  void reset(const Schedule& s) {
    streams_.assign(s.buffers.size(), 0);
    for (const Op& op : s.ops) {
      const uint8_t bit = uint8_t(1u << int(op.stream));
      for (int i = 0; i < op.n_in; ++i) streams_[size_t(op.in[size_t(i)].buffer)] |= bit;
      for (int i = 0; i < op.n_out; ++i) streams_[size_t(op.out[size_t(i)].buffer)] |= bit;
    }
    slot.assign(streams_.size(), -1);
    size_t shared = 0;
    for (size_t b = 0; b < streams_.size(); ++b)
      if (streams_[b] == 3) slot[b] = int32_t(shared++);
    if (lists_.size() < shared) lists_.resize(shared);
    for (size_t i = 0; i < shared; ++i) lists_[i].clear();
  }
  std::vector<Access>* of(const Region& r) {
    const int32_t i = slot[size_t(r.buffer)];
    return i < 0 ? nullptr : &lists_[size_t(i)];
  }

 private:
  std::vector<uint8_t> streams_;  // per buffer: bit 1 << stream for each stream that touches it
  std::vector<std::vector<Access>> lists_;
};

// One region of an op on a buffer both streams touch, with that buffer's history.
struct Touch {
  std::vector<Access>* history;
  const Region* r;
  bool write;
};

// The ops `op` must wait for on the other stream, appended to deps: for a read the writers of an
// overlapping region, for a write every access to one.
void add_conflicts(const Op& op, const std::array<Touch, kMaxIn + kMaxOut>& touches, int n,
                   std::vector<int32_t>& deps) {
  for (int t = 0; t < n; ++t) {
    const Touch& x = touches[size_t(t)];
    for (const Access& a : *x.history)
      if ((x.write || a.write) && a.stream != op.stream && overlaps(a.r, *x.r)) deps.push_back(a.op);
  }
}

// The op's own accesses join the histories.
void record(const Op& op, const std::array<Touch, kMaxIn + kMaxOut>& touches, int n) {
  for (int t = 0; t < n; ++t) {
    const Touch& x = touches[size_t(t)];
    std::vector<Access>& list = *x.history;
    if (x.write) {
      // Accesses inside the newly written region are ordered before this write (by stream order or by the
      // edges just added), so any later conflict with them is also a conflict with this write: forget them.
      list.erase(
          std::remove_if(list.begin(), list.end(), [&](const Access& a) { return contains(*x.r, a.r); }),
          list.end());
    }
    list.push_back(Access{op.index, op.stream, x.write, *x.r});
  }
}

// An op waits for a few others: insertion sort, without std::sort's call and partitioning.
void sort_small(std::vector<int32_t>& v) {
  if (v.size() > 32) {
    std::sort(v.begin(), v.end());
    return;
  }
  for (size_t i = 1; i < v.size(); ++i) {
    const int32_t x = v[i];
    size_t j = i;
    for (; j > 0 && v[j - 1] > x; --j) v[j] = v[j - 1];
    v[j] = x;
  }
}

}  // namespace

void add_hazard_deps(Schedule& s) {
  thread_local Histories histories;
  thread_local std::vector<int32_t> deps;
  histories.reset(s);
  std::array<Touch, kMaxIn + kMaxOut> touches;
  for (Op& op : s.ops) {
    // Reads first, then writes: the order the conflicts are found and the accesses recorded in.
    int n = 0;
    for (int i = 0; i < op.n_in; ++i)
      if (std::vector<Access>* h = histories.of(op.in[size_t(i)]))
        touches[size_t(n++)] = {h, &op.in[size_t(i)], false};
    for (int i = 0; i < op.n_out; ++i)
      if (std::vector<Access>* h = histories.of(op.out[size_t(i)]))
        touches[size_t(n++)] = {h, &op.out[size_t(i)], true};
    deps.clear();
    if (n > 0) {
      add_conflicts(op, touches, n, deps);
      record(op, touches, n);
    }
    if (deps.empty() && op.deps.empty()) continue;
    // Merged in the reused list, so that the op's own is allocated (exactly) once.
    deps.insert(deps.end(), op.deps.begin(), op.deps.end());
    sort_small(deps);
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    op.deps.assign(deps.begin(), deps.end());
  }
}

}  // namespace domino::detail
