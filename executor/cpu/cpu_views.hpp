// cpu_views.hpp: turns a Region of a [batch][seq][cols] buffer into strided Eigen maps without copying.
// A region is uniformly strided when it covers the full seq range or a single batch entry; otherwise it is
// one uniform block of rows per batch entry. Kernels walk "runs" of rows that are uniform in every
// operand at once (for_each_run) and map each run as one Eigen matrix.
#pragma once

// GCC 12 reports false -Wmaybe-uninitialized inside the AVX-512 intrinsics Eigen inlines (GCC bug 105593,
// fixed in GCC 13). Must precede the first inclusion of Eigen/immintrin in each translation unit.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <Eigen/Core>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "executor/cpu/cpu_ops.hpp"

namespace domino::cpu {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatMap = Eigen::Map<RowMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;
using RowVecMap = Eigen::Map<Eigen::Matrix<float, 1, Eigen::Dynamic>>;
using ArrayRowMap = Eigen::Map<Eigen::Array<float, 1, Eigen::Dynamic>>;

struct View {
  float* base = nullptr;     // element (b0, s0, c0)
  int64_t rows = 0, cols = 0;
  int64_t ld = 0;            // buffer cols: distance between consecutive rows of one block
  int64_t block_rows = 1;    // rows per uniformly strided block (all rows when uniform)
  int64_t block_stride = 0;  // distance between consecutive batch entries (buffer seq * cols)
  int64_t seq_rows = 1;      // s1 - s0: rows per batch entry
  int64_t s0 = 0;            // seq index of the region's first row

  bool uniform() const { return block_rows >= rows; }
  float* row(int64_t r) const { return base + (r / block_rows) * block_stride + (r % block_rows) * ld; }
  // Rows left in the uniform block that contains row r.
  int64_t run(int64_t r) const { return block_rows - r % block_rows; }
  // n rows from r, which must lie in one uniform block.
  MatMap map(int64_t r, int64_t n) const { return MatMap(row(r), n, cols, Eigen::OuterStride<>(ld)); }
  MatMap all() const { return map(0, rows); }  // only for uniform views
  // Rows of the i-th batch entry of the region (always uniform).
  MatMap batch(int64_t i) const {
    return MatMap(base + i * block_stride, seq_rows, cols, Eigen::OuterStride<>(ld));
  }
  int64_t batches() const { return seq_rows > 0 ? rows / seq_rows : 0; }
  int64_t seq_index(int64_t r) const { return s0 + r % seq_rows; }
  ArrayRowMap row_array(int64_t r) const { return ArrayRowMap(row(r), cols); }
  // Columns [c, c+n) of this view, same rows.
  View columns(int64_t c, int64_t n) const {
    View v = *this;
    v.base += c;
    v.cols = n;
    return v;
  }
};

View view_of(const CpuOpContext& ctx, const Region& r);
// The op's optional operand in[i] / out[i] (a bias, a position table), or nullopt when the op has none.
std::optional<View> optional_input(const CpuOpContext& ctx, const Op& op, int i);
std::optional<View> optional_output(const CpuOpContext& ctx, const Op& op, int i);

// Calls f(r, n) for consecutive runs of rows [r, r+n) that are uniform in every view given.
template <typename F, typename... Views>
void for_each_run(int64_t rows, F&& f, const Views&... views) {
  for (int64_t r = 0; r < rows;) {
    const int64_t n = std::min({rows - r, views.run(r)...});
    f(r, n);
    r += n;
  }
}

// Thread-local float scratch of at least n elements (reused; kernels must not hold two at once).
float* scratch(int64_t n, int slot = 0);

// The kernels, one per topic file; dispatch in cpu_ops.cpp. Ops are validated (sim/ir/verify.hpp) before
// they are called.
void matmul(const Op& op, const CpuOpContext& ctx);
void matmul_dgrad(const Op& op, const CpuOpContext& ctx);
void matmul_wgrad(const Op& op, const CpuOpContext& ctx);
void norm_fwd(const Op& op, const CpuOpContext& ctx, bool layer_norm);
void norm_bwd(const Op& op, const CpuOpContext& ctx, bool layer_norm);
void gelu_fwd(const Op& op, const CpuOpContext& ctx);
void gelu_bwd(const Op& op, const CpuOpContext& ctx);
void swiglu_fwd(const Op& op, const CpuOpContext& ctx);
void swiglu_bwd(const Op& op, const CpuOpContext& ctx);
void relu_fwd(const Op& op, const CpuOpContext& ctx);
void relu_bwd(const Op& op, const CpuOpContext& ctx);
void geglu_fwd(const Op& op, const CpuOpContext& ctx);
void geglu_bwd(const Op& op, const CpuOpContext& ctx);
void rope(const Op& op, const CpuOpContext& ctx, bool inverse);
void attn_fwd(const Op& op, const CpuOpContext& ctx);
void attn_bwd(const Op& op, const CpuOpContext& ctx);
void residual_add(const Op& op, const CpuOpContext& ctx);
// The id stored at row r of `ids` (token or target ids as floats) as an index below `limit`; anything
// else is a runtime error naming the op.
int64_t token_at(const Op& op, const View& ids, int64_t r, int64_t limit, const char* what);
void embedding_fwd(const Op& op, const CpuOpContext& ctx);
void embedding_bwd(const Op& op, const CpuOpContext& ctx);
void position_add(const Op& op, const CpuOpContext& ctx);
void logit_max(const Op& op, const CpuOpContext& ctx);
void logit_sum_exp(const Op& op, const CpuOpContext& ctx);
void cross_entropy(const Op& op, const CpuOpContext& ctx);
void adam_step(const Op& op, const CpuOpContext& ctx);
void sgd_step(const Op& op, const CpuOpContext& ctx);

}  // namespace domino::cpu
