// cpu_views.cpp: Region -> View (pointer arithmetic only; bounds were checked by cpu_check.cpp) and the
// per-thread scratch kernels use instead of allocating on every call.
#include "executor/cpu/cpu_views.hpp"

#include <array>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace domino::cpu {

View view_of(const CpuOpContext& ctx, const Region& r) {
  const BufferDesc& buf = ctx.schedule->buffers[size_t(r.buffer)];
  View v;
  v.base = ctx.buffers[size_t(r.buffer)] + (r.b0 * buf.seq + r.s0) * buf.cols + r.c0;
  v.rows = r.rows();
  v.cols = r.cols();
  v.ld = buf.cols;
  v.seq_rows = std::max<int64_t>(1, r.s1 - r.s0);
  v.s0 = r.s0;
  const bool uniform = (r.s0 == 0 && r.s1 == buf.seq) || r.b1 - r.b0 <= 1;
  v.block_rows = uniform ? std::max<int64_t>(1, v.rows) : v.seq_rows;
  v.block_stride = buf.seq * buf.cols;
  return v;
}

float* scratch(int64_t n, int slot) {
  // 64-byte aligned: Eigen's vectorised reductions choose their summation order from the address
  // alignment, so malloc'ed scratch at varying addresses made results differ in the last bit run to run.
  struct Block {
    float* data = nullptr;
    int64_t size = 0;
    ~Block() { std::free(data); }
  };
  thread_local std::array<Block, 4> pool;
  Block& s = pool[size_t(slot)];
  if (s.size < n) {
    std::free(s.data);
    const size_t bytes = (size_t(n) * sizeof(float) + 63) / 64 * 64;
    s.data = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (!s.data) throw std::bad_alloc();
    std::memset(s.data, 0, bytes);
    s.size = n;
  }
  return s.data;
}

std::optional<View> optional_input(const CpuOpContext& ctx, const Op& op, int i) {
  if (op.n_in <= i) return std::nullopt;
  return view_of(ctx, op.in[size_t(i)]);
}

std::optional<View> optional_output(const CpuOpContext& ctx, const Op& op, int i) {
  if (op.n_out <= i) return std::nullopt;
  return view_of(ctx, op.out[size_t(i)]);
}

}  // namespace domino::cpu
