// cpu_gemm_bench.cpp: a MatMul op run through run_cpu_op on schedule-like buffers (whole buffers, strided
// column chunks, sequence slices over several batch entries) against a plain Eigen product of the same
// shape. The executor's GEMMs must stay within 10% of the plain product: compare the *_op and *_eigen
// times of one shape (the "ratio" is eigen time / op time).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 false positive in AVX-512 intrinsics
#endif
#include <Eigen/Core>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "executor/cpu/cpu_ops.hpp"

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

enum Layout { kWhole = 0, kColumnChunk = 1, kSequenceSlice = 2 };

// m = batch * seq rows, k inputs, n outputs.
void plain_eigen(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  RowMatrix a = RowMatrix::Random(m, k), b = RowMatrix::Random(k, n), c(m, n);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * double(m) * double(k) * double(n), benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::kIs1000);
}

// The same product as an op: kWhole (whole buffers), kColumnChunk (the weight and output are the second of
// four column chunks of wider buffers), kSequenceSlice (rows = seq [S/4, S/2) of 4 batch entries).
void executor_op(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const auto layout = Layout(state.range(3));
  const int64_t batch = 4, seq = layout == kSequenceSlice ? 4 * m / batch : m / batch;
  const int64_t wide = layout == kColumnChunk ? 4 * n : n, c0 = layout == kColumnChunk ? n : 0;
  domino::Schedule s;
  s.buffers = {{"x", domino::BufferRole::Activation, domino::ParamKind::None, 0, batch, seq, k},
               {"w", domino::BufferRole::Param, domino::ParamKind::Fc1Weight, 0, 1, k, wide},
               {"y", domino::BufferRole::Activation, domino::ParamKind::None, 0, batch, seq, wide}};
  std::vector<std::vector<float>> data;
  for (const auto& b : s.buffers) data.emplace_back(size_t(b.elements()), 0.5f);
  domino::Op op;
  op.name = "bench";
  op.code = domino::OpCode::MatMul;
  const int64_t s0 = layout == kSequenceSlice ? seq / 4 : 0, s1 = layout == kSequenceSlice ? seq / 2 : seq;
  op.in[0] = {0, 0, batch, s0, s1, 0, k};
  op.in[1] = {1, 0, 1, 0, k, c0, c0 + n};
  op.out[0] = {2, 0, batch, s0, s1, c0, c0 + n};
  op.n_in = 2, op.n_out = 1;
  s.ops.push_back(op);
  domino::CpuOpContext ctx;
  ctx.schedule = &s;
  for (auto& d : data) ctx.buffers.push_back(d.data());
  for (auto _ : state) {
    domino::run_cpu_op(op, ctx);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * double(m) * double(k) * double(n), benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::kIs1000);
}

// Shapes of the CPU-sized models: (tokens, hidden) x (hidden, 3h/tp | 4h/tp) and the row-parallel ones.
void shapes(benchmark::internal::Benchmark* b, bool with_layout) {
  const std::vector<std::vector<int64_t>> mkn = {
      {2048, 512, 768}, {2048, 512, 1024}, {2048, 1024, 512}, {512, 512, 512}};
  for (const auto& s : mkn) {
    if (!with_layout) {
      b->Args({s[0], s[1], s[2]});
      continue;
    }
    for (int64_t layout : {kWhole, kColumnChunk, kSequenceSlice}) b->Args({s[0], s[1], s[2], layout});
  }
}

void plain_shapes(benchmark::internal::Benchmark* b) { shapes(b, false); }
void op_shapes(benchmark::internal::Benchmark* b) { shapes(b, true); }
// With --benchmark_repetitions, the fastest repetition is the least disturbed by other processes.
double fastest(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end()); }

BENCHMARK(plain_eigen)
    ->Apply(plain_shapes)
    ->ArgNames({"m", "k", "n"})
    ->Unit(benchmark::kMillisecond)
    ->ComputeStatistics("min", fastest);
BENCHMARK(executor_op)
    ->Apply(op_shapes)
    ->ArgNames({"m", "k", "n", "layout"})
    ->Unit(benchmark::kMillisecond)
    ->ComputeStatistics("min", fastest);

}  // namespace

BENCHMARK_MAIN();
