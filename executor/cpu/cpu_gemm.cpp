// cpu_gemm.cpp: MatMul, MatMulDgrad, MatMulWgrad as Eigen products on strided maps (no copies).
// Row-sliced operands with several batch entries become one GEMM per uniform run of rows; the weight-
// gradient GEMM sums its runs into the same output.
#include "executor/cpu/cpu_views.hpp"

#include <Eigen/Core>

namespace domino::cpu {

namespace {
// With OpenMP, Eigen would split every product over all cores by default; one thread per rank unless the
// backend is told otherwise (CpuBackend::prepare, domino-exec --threads), so that the profiler, the tests
// and the ranks of one machine do not oversubscribe it.
[[maybe_unused]] const bool kOneThreadByDefault = (Eigen::setNbThreads(1), true);
}  // namespace

// out[0] (+)= in[0] · in[1] (+ bias in[2], added once even when accumulating).
void matmul(const Op& op, const CpuOpContext& ctx) {
  const View a = view_of(ctx, op.in[0]);
  const View c = view_of(ctx, op.out[0]);
  const MatMap b = view_of(ctx, op.in[1]).all();
  const std::optional<View> bias = optional_input(ctx, op, 2);
  for_each_run(
      a.rows,
      [&](int64_t r, int64_t n) {
        MatMap cm = c.map(r, n);
        const MatMap am = a.map(r, n);
        if (bias) {
          const MatMap bv = bias->map(0, 1);
          if (op.attrs.accumulate) {
            cm.rowwise() += bv.row(0);
          } else {
            cm = bv.replicate(n, 1);
          }
          cm.noalias() += am * b;
        } else if (op.attrs.accumulate) {
          cm.noalias() += am * b;
        } else {
          cm.noalias() = am * b;
        }
      },
      a, c);
}

// out[0] (+)= in[0] · in[1]^T.
void matmul_dgrad(const Op& op, const CpuOpContext& ctx) {
  const View a = view_of(ctx, op.in[0]);
  const View c = view_of(ctx, op.out[0]);
  const MatMap b = view_of(ctx, op.in[1]).all();
  for_each_run(
      a.rows,
      [&](int64_t r, int64_t n) {
        MatMap cm = c.map(r, n);
        if (op.attrs.accumulate) {
          cm.noalias() += a.map(r, n) * b.transpose();
        } else {
          cm.noalias() = a.map(r, n) * b.transpose();
        }
      },
      a, c);
}

// out[0] (+)= in[0]^T · in[1] summed over all rows; out[1] (+)= column sums of in[1] when present.
void matmul_wgrad(const Op& op, const CpuOpContext& ctx) {
  const View a = view_of(ctx, op.in[0]);
  const View b = view_of(ctx, op.in[1]);
  MatMap w = view_of(ctx, op.out[0]).all();
  bool overwrite = !op.attrs.accumulate;
  for_each_run(
      a.rows,
      [&](int64_t r, int64_t n) {
        if (overwrite) {
          w.noalias() = a.map(r, n).transpose() * b.map(r, n);
          overwrite = false;
        } else {
          w.noalias() += a.map(r, n).transpose() * b.map(r, n);
        }
      },
      a, b);
  if (overwrite) w.setZero();  // no rows at all

  if (op.n_out < 2) return;
  MatMap db = view_of(ctx, op.out[1]).all();
  if (!op.attrs.accumulate) db.setZero();
  for_each_run(
      b.rows, [&](int64_t r, int64_t n) { db.row(0) += b.map(r, n).colwise().sum(); }, b);
}

}  // namespace domino::cpu
