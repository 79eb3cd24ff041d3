// rank_measure.cpp: the measuring loops of one rank (see rank_measure.hpp). Every collective loop runs the
// same number of iterations on every rank (counts are derived from agreed figures), or the group deadlocks.
#include "executor/profiler/rank_measure.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "executor/profiler/op_bench.hpp"
#include "sim/fit/stats.hpp"
#include "executor/runtime/gloo_comm.hpp"

namespace domino::prof {

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kTag = 1;

double since(Clock::time_point t0, Clock::time_point t) { return std::chrono::duration<double, std::micro>(t - t0).count(); }

// The mean of `value` over the group: the same number on every rank.
double agree(GlooComm& comm, double value) {
  float v = float(value);
  comm.allreduce_sum(&v, 1, kTag, "profiler: agreeing on a repeat count");
  return double(v) / comm.world();
}

RepeatPolicy compute_policy(bool quick) {
  RepeatPolicy p;
  p.warmup = quick ? 1 : 2;
  p.min_repeats = quick ? 5 : 9;
  p.max_repeats = quick ? 15 : 60;
  p.min_total_us = quick ? 60'000 : 600'000;
  return p;
}

nlohmann::json op_json(const Probe& probe, const std::vector<double>& samples) {
  const Op& op = probe.op();
  return {{"label", probe.label}, {"kind", to_string(op.kind)}, {"code", to_string(op.code)}, {"m", op.m},
          {"n", op.n}, {"k", op.k}, {"flops", op.flops}, {"bytes", op.bytes}, {"dtype", int(op.dtype)}, {"samples_us", samples}};
}

nlohmann::json measure_compute(const Workload& w, GlooComm& comm, bool quick, Progress& progress) {
  nlohmann::json out = nlohmann::json::array();
  std::vector<const Probe*> probes;
  for (const auto* list : {&w.gemms, &w.memory_ops, &w.attention})
    for (const Probe& p : *list) probes.push_back(&p);
  const RepeatPolicy policy = compute_policy(quick);
  // Memory-bound probes rotate over buffer sets larger than the caches together (op_bench.hpp).
  constexpr double kColdBytes = 64.0 * 1024 * 1024;
  int i = 0;
  for (const Probe* p : probes) {
    progress.step(p->label, ++i, int(probes.size()));
    const Op& op = p->mini->ops.front();
    const int copies = memory_bound(op.kind) ? std::clamp(int(std::ceil(kColdBytes / std::max(1.0, op.bytes))), 1, 32) : 1;
    OpBench bench(*p->mini, 1234 + uint64_t(i), copies);
    comm.barrier("profiler: compute probe");  // ranks compute side by side, as in a training step
    out.push_back(op_json(*p, time_repeats([&] { bench.run(); }, policy)));
  }
  return out;
}

// Repeats for a message: enough for a stable median, bounded by the time the expected transfer takes.
int allreduce_repeats(double bytes, double link_gbps, bool quick) {
  const double bytes_per_us = (link_gbps > 0 ? link_gbps / 8 : 1.0) * 1e3;
  const double expected_us = 60 + bytes / bytes_per_us;
  const double budget_us = quick ? 200'000 : 1'500'000;
  const int lo = quick ? 5 : 9, hi = quick ? 20 : 100;
  return std::clamp(int(budget_us / expected_us), lo, hi);
}

nlohmann::json measure_collectives(const Workload& w, GlooComm& comm, const MeasureOptions& o, Progress& progress) {
  nlohmann::json out = nlohmann::json::array();
  int i = 0;
  for (double bytes : w.allreduce_bytes) {
    progress.step("allreduce " + std::to_string(int64_t(bytes)) + " B", ++i, int(w.allreduce_bytes.size()));
    std::vector<float> data(std::max<size_t>(1, size_t(bytes / 4)), 1.0f);
    const int reps = allreduce_repeats(bytes, o.link_gbps, o.quick);
    std::vector<double> samples;
    for (int r = -2; r < reps; ++r) {  // two warm-up rounds
      comm.barrier("profiler: allreduce");
      const auto t0 = Clock::now();
      comm.allreduce_sum(data.data(), data.size(), kTag, "profiler: allreduce of " + std::to_string(int64_t(bytes)) + " B");
      if (r >= 0) samples.push_back(since(t0, Clock::now()));
    }
    out.push_back({{"bytes", double(data.size() * 4)}, {"samples_us", samples}});
  }
  return out;
}

// A GEMM thread runs back to back while this thread runs AllReduces back to back; GEMMs that ran wholly
// inside the AllReduce window measured "compute during comm", the AllReduces "comm during compute".
nlohmann::json measure_interference(const Workload& w, GlooComm& comm, const MeasureOptions& o, Progress& progress) {
  progress.step("interference", 1, 1);
  OpBench gemm(*w.interference_gemm->mini, 99);
  std::vector<float> data(std::max<size_t>(1, size_t(w.interference_bytes / 4)), 1.0f);
  const auto allreduce = [&] { comm.allreduce_sum(data.data(), data.size(), kTag, "profiler: interference allreduce"); };

  RepeatPolicy gp = compute_policy(o.quick);
  const std::vector<double> gemm_alone = time_repeats([&] { gemm.run(); }, gp);
  comm.barrier("profiler: interference");
  const int n_alone = allreduce_repeats(w.interference_bytes, o.link_gbps, o.quick);
  std::vector<double> ar_alone;
  for (int r = -2; r < n_alone; ++r) {
    const auto t0 = Clock::now();
    allreduce();
    if (r >= 0) ar_alone.push_back(since(t0, Clock::now()));
  }
  // Enough AllReduces to cover several GEMMs (agreed over the group so every rank runs the same count).
  const double want = 8 * median_of(gemm_alone) / std::max(1.0, median_of(ar_alone));
  const int n_during = std::clamp(int(std::ceil(agree(comm, want))), n_alone, o.quick ? 60 : 400);

  std::atomic<bool> stop{false};
  std::vector<std::pair<double, double>> gemm_spans;  // [start, end] from t0
  const auto t0 = Clock::now();
  std::thread compute([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      const double s = since(t0, Clock::now());
      gemm.run();
      gemm_spans.emplace_back(s, since(t0, Clock::now()));
    }
  });
  std::vector<double> ar_during;
  double window_start = 0, window_end = 0;
  try {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the GEMM thread is running
    comm.barrier("profiler: interference");
    window_start = since(t0, Clock::now());
    for (int r = 0; r < n_during; ++r) {
      const auto a = Clock::now();
      allreduce();
      ar_during.push_back(since(a, Clock::now()));
    }
    window_end = since(t0, Clock::now());
  } catch (...) {
    stop = true;
    compute.join();
    throw;
  }
  stop = true;
  compute.join();
  std::vector<double> gemm_during;
  for (const auto& [s, e] : gemm_spans)
    if (s >= window_start && e <= window_end) gemm_during.push_back(e - s);
  const Op& op = gemm.op();
  return {{"m", op.m}, {"n", op.n}, {"k", op.k}, {"flops", op.flops}, {"bytes", double(data.size() * 4)},
          {"gemm_alone_us", gemm_alone}, {"gemm_during_us", gemm_during}, {"allreduce_alone_us", ar_alone},
          {"allreduce_during_us", ar_during}};
}

// Arrival skew: from a barrier every rank runs the same stretch of GEMMs, about as long as the compute
// between two AllReduces of a CPU training step, then a one-element AllReduce. The first rank to arrive
// waits for the last, so per repeat the spread of the ranks' AllReduce times is the skew (profile_fit.cpp).
nlohmann::json measure_sync(const Workload& w, GlooComm& comm, bool quick, Progress& progress) {
  constexpr double kStretchUs = 15'000;
  progress.step("arrival skew", 1, 1);
  OpBench gemm(*w.interference_gemm->mini, 7);
  const double one_us = median_of(time_repeats([&] { gemm.run(); }, compute_policy(true)));
  const int per_stretch = std::clamp(int(std::ceil(agree(comm, kStretchUs / std::max(one_us, 1.0)))), 1, 1000);
  float value = 1;
  std::vector<double> allreduce_us;
  for (int r = -2; r < (quick ? 12 : 100); ++r) {  // two warm-up rounds
    comm.barrier("profiler: arrival skew");
    for (int i = 0; i < per_stretch; ++i) gemm.run();
    const auto t0 = Clock::now();
    comm.allreduce_sum(&value, 1, kTag, "profiler: arrival-skew allreduce");
    if (r >= 0) allreduce_us.push_back(since(t0, Clock::now()));
  }
  return {{"stretch_us", per_stretch * one_us}, {"allreduce_us", allreduce_us}};
}

}  // namespace

nlohmann::json measure_rank(const Workload& w, GlooComm& comm, const MeasureOptions& o) {
  Progress p("domino-profile:", comm.rank() == 0);
  nlohmann::json out;
  out["rank"] = comm.rank();
  if (o.compute) out["compute"] = measure_compute(w, comm, o.quick, p);
  if (comm.world() > 1) {
    out["collectives"] = measure_collectives(w, comm, o, p);
    out["interference"] = measure_interference(w, comm, o, p);
    if (o.compute) out["sync"] = measure_sync(w, comm, o.quick, p);
  }
  p.done();
  return out;
}

}  // namespace domino::prof
