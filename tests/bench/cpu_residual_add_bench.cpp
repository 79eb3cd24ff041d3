// cpu_residual_add_bench.cpp: a residual add (out = a + b over n floats) timed by where its operands are when
// it starts, as a training step leaves them: both inputs cold with a separate output (the add after an
// AllReduce whose sum lies in a buffer of its own), in place (out is a, as the sequence-parallel add writes
// into the rows its ReduceScatter filled), and either with `a` just written on this core (the collective's
// copy-out right before it). The cost model times memory-bound ops from bytes read + written at one fitted
// bandwidth, so the ratios of these cases are what that model does not see: a separate output is first read
// for ownership on a CPU (write-allocate), an in-place one is not, and a just-written operand comes from
// cache. Compare the four modes of one size (the _median rows: of three repetitions of 200 iterations, each
// timed alone after a sweep of four times the last-level cache).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace {

enum Mode : int64_t { kColdSeparate = 0, kColdInPlace = 1, kWarmSeparate = 2, kWarmInPlace = 3 };

// Bytes that evict the last-level cache: four times its size as the C library reports it (64 MiB when not).
size_t eviction_bytes() {
  const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return 4 * size_t(llc > 0 ? llc : 64L << 20);
}

void residual_add(benchmark::State& state) {
  const auto n = size_t(state.range(0));
  const auto mode = Mode(state.range(1));
  const bool in_place = mode == kColdInPlace || mode == kWarmInPlace;
  const bool warm = mode == kWarmSeparate || mode == kWarmInPlace;
  std::vector<float> a(n, 1.0f), b(n, 2.0f), separate(n), staged(n, 3.0f);
  std::vector<float> sweep(eviction_bytes() / sizeof(float), 0.0f);
  float* out = in_place ? a.data() : separate.data();
  for (auto _ : state) {
    for (size_t i = 0; i < sweep.size(); i += 16) sweep[i] += 1.0f;  // one write per 64-byte line
    if (warm) std::copy(staged.begin(), staged.end(), a.begin());
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
    benchmark::DoNotOptimize(out);
    benchmark::ClobberMemory();
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  // The bytes the cost model counts (two inputs and the output), per second of the add.
  state.counters["model_GBps"] = benchmark::Counter(
      12.0 * double(n), benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// 196608 and 393216 floats: the cpu-gpt and cpu-llama residual adds on half and all of a micro-batch's rows;
// 1572864: well past a core's L2.
BENCHMARK(residual_add)
    ->ArgsProduct({{196608, 393216, 1572864}, {kColdSeparate, kColdInPlace, kWarmSeparate, kWarmInPlace}})
    ->ArgNames({"floats", "mode"})
    ->UseManualTime()
    ->Iterations(200)
    ->Repetitions(3)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
