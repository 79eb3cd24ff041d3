// cpu_test_util.hpp: a tiny hand-built schedule for testing CPU kernels one op at a time: buffers filled
// with seeded random data, regions read out as double matrices for naive reference computations,
// NaN-poisoned outputs, and a finite-difference helper.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <initializer_list>
#include <limits>
#include <random>
#include <vector>

#include "executor/cpu/cpu_ops.hpp"

namespace domino::cputest {

// Dense row-major double matrix: the reference side of every comparison.
struct Mat {
  int64_t rows = 0, cols = 0;
  std::vector<double> v;
  Mat() = default;
  Mat(int64_t r, int64_t c, double fill = 0.0) : rows(r), cols(c), v(size_t(r * c), fill) {}
  double& operator()(int64_t r, int64_t c) { return v[size_t(r * cols + c)]; }
  double operator()(int64_t r, int64_t c) const { return v[size_t(r * cols + c)]; }
};

inline Region box(int32_t buf, int64_t b0, int64_t b1, int64_t s0, int64_t s1, int64_t c0, int64_t c1) {
  Region r;
  r.buffer = buf;
  r.b0 = b0, r.b1 = b1, r.s0 = s0, r.s1 = s1, r.c0 = c0, r.c1 = c1;
  return r;
}

class Bed {
 public:
  explicit Bed(unsigned seed = 1) : rng_(seed) {}

  // New buffer [batch][seq][cols] filled with uniform values in [lo, hi).
  int32_t buffer(const char* name, int64_t batch, int64_t seq, int64_t cols, double lo = -1.0, double hi = 1.0) {
    BufferDesc d;
    d.name = name;
    d.batch = batch, d.seq = seq, d.cols = cols;
    s.buffers.push_back(d);
    data_.emplace_back(size_t(d.elements()));
    std::uniform_real_distribution<double> u(lo, hi);
    for (float& x : data_.back()) x = float(u(rng_));
    return int32_t(s.buffers.size() - 1);
  }
  Region whole(int32_t buf) const {
    const BufferDesc& d = s.buffers[size_t(buf)];
    return box(buf, 0, d.batch, 0, d.seq, 0, d.cols);
  }

  Op make(OpCode code, std::initializer_list<Region> in, std::initializer_list<Region> out, OpAttrs attrs = {}) {
    Op op;
    op.name = "test";
    op.code = code;
    op.attrs = attrs;
    for (const Region& r : in) op.in[op.n_in++] = r;
    for (const Region& r : out) op.out[op.n_out++] = r;
    op.index = int32_t(s.ops.size());
    s.ops.push_back(op);
    return op;
  }

  CpuOpContext context() {
    CpuOpContext ctx;
    ctx.schedule = &s;
    for (auto& d : data_) ctx.buffers.push_back(d.data());
    ctx.hyper = hyper;
    ctx.step = step;
    ctx.rank = rank;
    return ctx;
  }
  void run(const Op& op) { run_cpu_op(op, context()); }

  float& at(const Region& r, int64_t row, int64_t col) {
    const BufferDesc& d = s.buffers[size_t(r.buffer)];
    const int64_t srows = r.s1 - r.s0;
    const int64_t b = r.b0 + row / srows, q = r.s0 + row % srows;
    return data_[size_t(r.buffer)][size_t((b * d.seq + q) * d.cols + r.c0 + col)];
  }
  Mat get(const Region& r) {
    Mat m(r.rows(), r.cols());
    for (int64_t i = 0; i < m.rows; ++i)
      for (int64_t j = 0; j < m.cols; ++j) m(i, j) = at(r, i, j);
    return m;
  }
  void set(const Region& r, const Mat& m) {
    for (int64_t i = 0; i < m.rows; ++i)
      for (int64_t j = 0; j < m.cols; ++j) at(r, i, j) = float(m(i, j));
  }
  void poison(const Region& r) {
    for (int64_t i = 0; i < r.rows(); ++i)
      for (int64_t j = 0; j < r.cols(); ++j) at(r, i, j) = std::numeric_limits<float>::quiet_NaN();
  }
  std::vector<float>& raw(int32_t buf) { return data_[size_t(buf)]; }

  // Expects region r to equal ref within atol + rtol * |ref| (NaN never passes).
  void expect_near(const Region& r, const Mat& ref, double atol, double rtol, const char* what) {
    ASSERT_EQ(r.rows(), ref.rows) << what;
    ASSERT_EQ(r.cols(), ref.cols) << what;
    int failures = 0;
    for (int64_t i = 0; i < ref.rows; ++i) {
      for (int64_t j = 0; j < ref.cols; ++j) {
        const double got = at(r, i, j), want = ref(i, j);
        if (!(std::abs(got - want) <= atol + rtol * std::abs(want)) && ++failures <= 5) {
          ADD_FAILURE() << what << " (" << i << "," << j << "): got " << got << ", want " << want;
        }
      }
    }
    EXPECT_EQ(failures, 0) << what << ": " << failures << " mismatches";
  }

  Schedule s;
  OptimizerHyper hyper;
  int64_t step = 1;
  int rank = 0;  // the vocabulary shard vocab-parallel ops see

 private:
  std::mt19937 rng_;
  std::vector<std::vector<float>> data_;
};

// Expects every element of buffer `buf` outside region r to be unchanged from `before`.
inline void expect_untouched_outside(Bed& bed, const Region& r, const std::vector<float>& before) {
  const BufferDesc& d = bed.s.buffers[size_t(r.buffer)];
  const std::vector<float>& now = bed.raw(r.buffer);
  int changed = 0;
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t q = 0; q < d.seq; ++q)
      for (int64_t c = 0; c < d.cols; ++c) {
        const bool inside = b >= r.b0 && b < r.b1 && q >= r.s0 && q < r.s1 && c >= r.c0 && c < r.c1;
        const size_t i = size_t((b * d.seq + q) * d.cols + c);
        if (!inside && !(now[i] == before[i] || (std::isnan(now[i]) && std::isnan(before[i])))) ++changed;
      }
  EXPECT_EQ(changed, 0) << "elements outside the output region of '" << d.name << "' changed";
}

inline Mat matmul(const Mat& a, const Mat& b, bool ta = false, bool tb = false) {
  const int64_t m = ta ? a.cols : a.rows, k = ta ? a.rows : a.cols, n = tb ? b.rows : b.cols;
  Mat c(m, n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t l = 0; l < k; ++l) acc += (ta ? a(l, i) : a(i, l)) * (tb ? b(j, l) : b(l, j));
      c(i, j) = acc;
    }
  return c;
}

inline Mat add(const Mat& a, const Mat& b) {
  Mat c = a;
  for (size_t i = 0; i < c.v.size(); ++i) c.v[i] += b.v[i];
  return c;
}

// Central finite differences of loss() w.r.t. a few elements of region `x`, compared with `grad` (the
// analytic gradient, same shape as x). loss() must rerun the forward op(s) from the current buffers.
inline void expect_fd_gradient(Bed& bed, const Region& x, const Mat& grad, const std::function<double()>& loss,
                               double h, double atol, double rtol, const char* what, int samples = 24) {
  std::mt19937 rng(7);
  for (int t = 0; t < samples; ++t) {
    const int64_t i = int64_t(rng() % uint64_t(x.rows())), j = int64_t(rng() % uint64_t(x.cols()));
    float& e = bed.at(x, i, j);
    const float saved = e;
    e = saved + float(h);
    const double up = loss();
    e = saved - float(h);
    const double down = loss();
    e = saved;
    const double fd = (up - down) / (double(saved + float(h)) - double(saved - float(h)));
    EXPECT_NEAR(grad(i, j), fd, atol + rtol * std::abs(fd)) << what << " (" << i << "," << j << ")";
  }
  loss();  // leave the forward outputs consistent with the unperturbed inputs
}

// sum over region r of value * weight (weights: a Mat of r's shape): a scalar loss for gradient checks.
inline double weighted_sum(Bed& bed, const Region& r, const Mat& w) {
  double acc = 0;
  for (int64_t i = 0; i < r.rows(); ++i)
    for (int64_t j = 0; j < r.cols(); ++j) acc += double(bed.at(r, i, j)) * w(i, j);
  return acc;
}

}  // namespace domino::cputest
