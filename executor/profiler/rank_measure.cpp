// rank_measure.cpp: the measuring loops of one rank (see rank_measure.hpp). Every probe is a schedule
// prepared on a backend of its own and run by the runtime's stream workers (probe_runner.hpp). Every
// collective loop runs the same number of iterations on every rank (counts are derived from agreed
// figures), or the group deadlocks.
#include "executor/profiler/rank_measure.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "executor/job/backends.hpp"
#include "executor/profiler/cold_cache.hpp"
#include "executor/profiler/drift_reference.hpp"
#include "executor/profiler/probe_runner.hpp"
#include "executor/profiler/probe_schedule.hpp"
#include "executor/profiler/progress_line.hpp"
#include "executor/runtime/gloo_comm.hpp"
#include "sim/fit/stats.hpp"
#include "sim/ir/gemm_blocks.hpp"

namespace domino::prof {

namespace {

constexpr uint32_t kTag = 1;

// What every probe of this rank shares: the options, the group, the backend's traits and the AllReduce
// algorithms to measure one by one (empty: the library's one algorithm).
struct RankBench {
  const MeasureOptions& options;
  GlooComm& comm;
  ProfilingTraits traits;
  std::vector<std::string> algorithms;

  // A probe of this rank, its compute worker scheduled as --realtime asks.
  PreparedProbe prepare(Schedule schedule, const RankContext& ctx) const {
    return PreparedProbe(options.backend, std::move(schedule), ctx, options.realtime);
  }
  // Compute probes: a group of one (no collective), on this rank's device.
  RankContext compute_ctx(uint64_t seed) const { return ctx(seed, 1, ""); }
  // Collective probes: the whole group, its collectives forced to `algorithm` ("": the library picks).
  RankContext group_ctx(uint64_t seed, const std::string& algorithm = "") const {
    return ctx(seed, comm.world(), algorithm);
  }

 private:
  RankContext ctx(uint64_t seed, int world, const std::string& algorithm) const {
    RankContext c;
    c.rank = comm.rank();
    c.world = world;
    c.seed = seed;
    c.comm = &comm;
    c.collective_algorithm = algorithm;
    return c;
  }
};

// The mean of `value` over the group: the same number on every rank.
double agree(GlooComm& comm, double value) {
  float v = float(value);
  comm.allreduce_sum(&v, 1, kTag, "profiler: agreeing on a repeat count");
  return double(v) / comm.world();
}

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Passes over a compute stage's probes (ProfilingTraits::compute_passes), at least one.
int compute_passes(const ProfilingTraits& traits) { return std::max(1, traits.compute_passes); }

// Repeats are iterations of a chain of `ops` ops, each giving ops (or ops - 1) samples; one pass's share.
RepeatPolicy compute_policy(const ProfilingTraits& traits, bool quick, int ops) {
  const int passes = compute_passes(traits);
  const int samples_per_iteration = std::max(1, ops > 1 ? ops - 1 : 1);
  RepeatPolicy p;
  p.warmup = quick ? 1 : 2;
  p.min_repeats = ceil_div(ceil_div(quick ? 5 : 9, samples_per_iteration), passes);
  p.max_repeats = ceil_div(ceil_div(quick ? 15 : 60, samples_per_iteration), passes);
  p.min_total_us = traits.probe_budget_us * (quick ? 0.1 : 1.0) / passes;
  return p;
}

// Copies of a probe's op per iteration: memory-bound probes rotate over buffer sets twice the last-level
// cache together (their data comes out of cache, as in a training step: cold_cache.hpp); a queueing device
// needs a chain.
int chain_length(const Schedule& mini, const ProfilingTraits& traits) {
  const Op& op = mini.ops.front();
  const int cold = memory_bound(op.kind) ? cold_buffer_sets(mini_bytes(mini), probe_cache_bytes()) : 1;
  return std::max(traits.min_chain, cold);
}

// Prepares the probe, waits for the other ranks (they compute side by side, as in a training step), times.
std::vector<double> time_compute(const RankBench& b, const Schedule& mini, uint64_t seed, bool quick) {
  const Op& op = mini.ops.front();
  const int copies = chain_length(mini, b.traits);
  Schedule chain = chain_of(mini, copies, memory_bound(op.kind));
  fill_with_values(chain, b.comm.world());
  PreparedProbe probe = b.prepare(std::move(chain), b.compute_ctx(seed));
  b.comm.barrier("profiler: compute probe");
  return probe.time_ops(compute_policy(b.traits, quick, copies));
}

// A whole GEMM of several row blocks gives its block's shape and the block count (GemmTiming::blocks).
nlohmann::json op_json(const Probe& probe, const std::vector<double>& samples) {
  const Op& op = probe.op();
  const Op shape = gemm_block(op);
  nlohmann::json j = {{"label", probe.label},
                      {"kind", to_string(op.kind)},
                      {"code", to_string(op.code)},
                      {"m", shape.m},
                      {"n", shape.n},
                      {"k", shape.k},
                      {"flops", op.flops},
                      {"bytes", op.bytes},
                      {"dtype", int(op.dtype)},
                      {"chunk", op.chunk},
                      {"samples_us", samples}};
  if (op.attrs.row_blocks > 1) j["row_blocks"] = op.attrs.row_blocks;
  return j;
}

// One stage's probes, timed in passes over all of them, appended to `out` with their pooled samples.
// `first`: the stage's first probe's index among all `total` (progress and seeds). With `reference`, each
// probe's samples are corrected for the drift the reference saw around it. Returns the reference's times.
std::vector<double> measure_stage(const char* stage, const std::vector<Probe>& probes, int first, int total,
                                  const RankBench& b, Progress& progress, DriftReference* reference,
                                  nlohmann::json& out) {
  const int passes = compute_passes(b.traits);
  StageTimings t;
  t.samples.assign(size_t(passes), std::vector<std::vector<double>>(probes.size()));
  if (reference) t.references.resize(size_t(passes));
  for (int pass = 0; pass < passes; ++pass) {
    for (size_t j = 0; j < probes.size(); ++j) {
      const int i = first + int(j) + 1;
      const std::string& label = probes[j].label;
      progress.step(stage, passes > 1 ? fmt::format("{} (pass {} of {})", label, pass + 1, passes) : label, i,
                    total);
      if (reference) t.references[size_t(pass)].push_back(reference->time_us());
      t.samples[size_t(pass)][j] = time_compute(b, *probes[j].mini, 1234 + uint64_t(i), b.options.quick);
    }
    if (reference && !probes.empty()) t.references[size_t(pass)].push_back(reference->time_us());
  }
  const std::vector<std::vector<double>> samples = pooled_samples(t);
  for (size_t j = 0; j < probes.size(); ++j) out.push_back(op_json(probes[j], samples[j]));
  std::vector<double> references;
  for (const auto& r : t.references) references.insert(references.end(), r.begin(), r.end());
  return references;
}

// The GEMM stage's drift reference (MeasureOptions::drift_reference), prepared as a compute probe is.
std::unique_ptr<DriftReference> gemm_drift_reference(const RankBench& b) {
  if (!b.options.drift_reference) return nullptr;
  Schedule mini =
      synthetic_gemm(kDriftReferenceSide, kDriftReferenceSide, kDriftReferenceSide, b.traits.gemm_dtype);
  fill_with_values(mini, b.comm.world());
  return std::make_unique<DriftReference>(std::make_unique<PreparedProbe>(
      b.options.backend, std::move(mini), b.compute_ctx(7), b.options.realtime));
}

// Every compute probe; the GEMMs' drift reference times, where one was timed, to `drift`.
nlohmann::json measure_compute(const Workload& w, const RankBench& b, Progress& progress,
                               nlohmann::json& drift) {
  nlohmann::json out = nlohmann::json::array();
  const std::unique_ptr<DriftReference> reference = gemm_drift_reference(b);
  const std::tuple<const char*, const std::vector<Probe>*, DriftReference*> stages[] = {
      {"gemm", &w.gemms, reference.get()},
      {"memory-bound", &w.memory_ops, nullptr},
      {"attention", &w.attention, nullptr}};
  const int total = int(w.gemms.size() + w.memory_ops.size() + w.attention.size());
  int first = 0;
  std::vector<double> references;
  for (const auto& [stage, probes, stage_reference] : stages) {
    const std::vector<double> times =
        measure_stage(stage, *probes, first, total, b, progress, stage_reference, out);
    references.insert(references.end(), times.begin(), times.end());
    first += int(probes->size());
  }
  if (reference)
    drift = {{"reference", fmt::format("gemm {0}x{0}x{0}", kDriftReferenceSide)}, {"times_us", references}};
  return out;
}

// Repeats for a message: enough for a stable median, bounded by the time the expected transfer takes (and
// the compute before it, where the probe has some).
int allreduce_repeats(double bytes, double link_gbps, bool quick, double before_us = 0) {
  const double bytes_per_us = (link_gbps > 0 ? link_gbps / 8 : 1.0) * 1e3;
  const double expected_us = 60 + bytes / bytes_per_us + before_us;
  const double budget_us = quick ? 200'000 : 1'500'000;
  const int lo = quick ? 5 : 9, hi = quick ? 20 : 100;
  return std::clamp(int(budget_us / expected_us), lo, hi);
}

// The probe of one collective of `kind` whose table key is `bytes`.
Schedule collective_probe(OpKind kind, double bytes, int world) {
  if (kind == OpKind::AllReduce) return allreduce_chain(bytes, 1);
  return sp_collective_chain(kind == OpKind::AllGather ? OpCode::AllGather : OpCode::ReduceScatter, bytes, world, 1);
}

// The compute before each collective probe with --collectives-after-compute: copies of the interference GEMM
// for about kComputeBeforeUs, the compute a sliced CPU training step runs between two collectives (8 ms made
// the predictions no better: docs/fidelity.md).
struct ComputeBefore {
  int gemms = 0;  // 0: none, a barrier alone before each collective
  double us = 0;
};
constexpr double kComputeBeforeUs = 2'000;

ComputeBefore compute_before_collectives(const Workload& w, const RankBench& b) {
  if (!b.options.collectives_after_compute) return {};
  const double one_us = median_of(time_compute(b, *w.interference_gemm->mini, 11, true));
  const int gemms =
      std::clamp(int(std::ceil(agree(b.comm, kComputeBeforeUs / std::max(one_us, 1.0)))), 1, 1000);
  return {gemms, gemms * one_us};
}

// One collective of `kind` per iteration, a barrier before each (two warm-up iterations), forced to
// `algorithm`, over the AllReduce's message sizes (under sequence parallelism an AllGather or ReduceScatter
// has the full size of the AllReduce it replaces); after `before`'s GEMMs where it has some.
nlohmann::json measure_collective(const Workload& w, const RankBench& b, Progress& progress, OpKind kind,
                                  const std::string& algorithm, const ComputeBefore& before) {
  nlohmann::json out = nlohmann::json::array();
  const std::string stage = std::string(to_string(kind)) + (algorithm.empty() ? "" : " " + algorithm);
  int i = 0;
  for (double bytes : w.allreduce_bytes) {
    progress.step(stage, std::to_string(int64_t(bytes)) + " B", ++i, int(w.allreduce_bytes.size()));
    Schedule schedule = collective_probe(kind, bytes, b.comm.world());
    const double key_bytes = collective_bytes(schedule.ops.front());
    if (before.gemms > 0) {
      schedule = collective_after_gemms(schedule, *w.interference_gemm->mini, before.gemms);
      fill_with_values(schedule, b.comm.world());
    }
    PreparedProbe probe = b.prepare(std::move(schedule), b.group_ctx(1, algorithm));
    const int32_t collective_op = int32_t(probe.schedule().ops.size() - 1);
    std::vector<double> samples;
    const int reps = allreduce_repeats(bytes, b.options.link_gbps, b.options.quick, before.us);
    for (const auto& spans : probe.run(2, reps, &b.comm))
      for (const OpTiming& t : spans)
        if (t.op == collective_op) samples.push_back(duration_us(t));
    nlohmann::json entry = {{"kind", to_string(kind)}, {"bytes", key_bytes}, {"samples_us", samples}};
    if (before.gemms > 0) entry["compute_before_us"] = before.us;
    out.push_back(std::move(entry));
  }
  return out;
}

// Per collective kind, the ring (or the library's one algorithm) under key(kind) and every other algorithm
// the backend can be forced to (NVLS on NVSwitch GPUs) under key(kind)_by_algorithm.<name>, each curve
// measured on its own. key: "collectives" for the AllReduce, "allgather" and "reducescatter" for the pair.
void measure_collectives(const Workload& w, const RankBench& b, Progress& progress, nlohmann::json& out) {
  const ComputeBefore before = compute_before_collectives(w, b);
  for (OpKind kind : {OpKind::AllReduce, OpKind::AllGather, OpKind::ReduceScatter}) {
    const std::string key = collective_samples_key(kind);
    if (b.algorithms.empty()) {
      out[key] = measure_collective(w, b, progress, kind, "", before);
      continue;
    }
    for (const std::string& a : b.algorithms) {
      if (a == "ring")
        out[key] = measure_collective(w, b, progress, kind, a, before);
      else
        out[key + "_by_algorithm"][a] = measure_collective(w, b, progress, kind, a, before);
    }
  }
}

// The backend's forceable algorithms, kept only where every rank can run them (a mismatch would leave
// ranks waiting in different communicators).
std::vector<std::string> agreed_algorithms(const Backend& backend, GlooComm& comm) {
  std::vector<std::string> agreed;
  const std::vector<std::string> mine = backend.forceable_collective_algorithms(comm.world());
  for (const char* a : {"ring", "nvls"}) {
    const bool here = std::find(mine.begin(), mine.end(), a) != mine.end();
    if (agree(comm, here ? 1.0 : 0.0) == 1.0) agreed.push_back(a);
  }
  return agreed;
}

// `count` AllReduces back to back after one barrier (the first two are warm-up and left out).
std::vector<double> allreduces_alone(const RankBench& b, double bytes, int count) {
  PreparedProbe probe = b.prepare(allreduce_chain(bytes, count + 2), b.group_ctx(2));
  const std::vector<OpTiming> spans = probe.run(0, 1, &b.comm).front();
  std::vector<double> out;
  for (const OpTiming& t : spans)
    if (t.op >= 2) out.push_back(duration_us(t));
  return out;
}

// GEMMs on the compute stream beside AllReduces on the comm stream, in one iteration; GEMMs that ran wholly
// inside the AllReduces' window measured "compute during comm", the AllReduces "comm during compute". The
// GEMMs that ran partly inside it are kept too, each with the part: where communication holds the core for
// the whole window (--realtime over loopback: the collectives' copies run above compute) no GEMM fits inside,
// and what the window cost the GEMMs across it is the only measure of compute beside communication.
constexpr int kInterferencePasses = 4;

nlohmann::json measure_interference(const Workload& w, const RankBench& b, Progress& progress) {
  progress.step("interference", "", 1, 1);
  const Schedule& gemm = *w.interference_gemm->mini;
  const bool quick = b.options.quick;
  const std::vector<double> gemm_alone = time_compute(b, gemm, 99, quick);
  const int n_alone = allreduce_repeats(w.interference_bytes, b.options.link_gbps, quick);
  const std::vector<double> ar_alone = allreduces_alone(b, w.interference_bytes, n_alone);
  // Enough AllReduces to cover several GEMMs, and GEMMs to outlast them (agreed: same counts everywhere).
  const double gemm_us = std::max(1e-3, median_of(gemm_alone)), ar_us = std::max(1e-3, median_of(ar_alone));
  const int n_during = std::clamp(int(std::ceil(agree(b.comm, 8 * gemm_us / ar_us))), n_alone, quick ? 60 : 400);
  const int gemms = std::clamp(int(std::ceil(agree(b.comm, 1.5 * n_during * ar_us / gemm_us))) + 2, 3, 4000);

  Schedule both = gemms_beside_allreduces(gemm, gemms, w.interference_bytes, n_during);
  fill_with_values(both, b.comm.world());
  PreparedProbe probe = b.prepare(std::move(both), b.group_ctx(3));
  // After a warm-up pass, several passes: in each, the GEMMs beside the AllReduces and, as their baseline,
  // the GEMMs of the same pass after the AllReduces ended (same buffers, same warm state;
  // profile_fit_comm.cpp). One unwarmed pass against the GEMM's own repeats gave a GEMM slowdown anywhere
  // from 10 % to 132 % in nine --quick measurements at 2 Gbit/s; four passes gave 71-84 % in four.
  std::vector<double> ar_during, gemm_during, gemm_after;
  nlohmann::json gemm_across = nlohmann::json::array();  // [duration_us, us inside the window]
  for (const std::vector<OpTiming>& spans : probe.run(1, kInterferencePasses, &b.comm)) {
    double window_start = 1e300, window_end = -1e300;
    for (const OpTiming& t : spans) {
      if (probe.schedule().ops[size_t(t.op)].code != OpCode::AllReduce) continue;
      window_start = std::min(window_start, t.start_us);
      window_end = std::max(window_end, t.end_us);
      ar_during.push_back(duration_us(t));
    }
    for (const OpTiming& t : spans) {
      if (probe.schedule().ops[size_t(t.op)].code == OpCode::AllReduce) continue;
      const double inside = std::min(t.end_us, window_end) - std::max(t.start_us, window_start);
      if (t.start_us >= window_start && t.end_us <= window_end) gemm_during.push_back(duration_us(t));
      else if (inside > 0)
        gemm_across.push_back({duration_us(t), inside});
      if (t.start_us >= window_end) gemm_after.push_back(duration_us(t));
    }
  }
  const Op& op = gemm.ops.front();
  return {{"m", op.m},
          {"n", op.n},
          {"k", op.k},
          {"flops", op.flops},
          {"bytes", collective_bytes(probe.schedule().ops.back())},
          {"gemm_alone_us", gemm_alone},
          {"gemm_during_us", gemm_during},
          {"gemm_after_us", gemm_after},
          {"gemm_across_us", gemm_across},
          {"allreduce_alone_us", ar_alone},
          {"allreduce_during_us", ar_during}};
}

// Arrival skew: from a barrier every rank runs the same stretch of GEMMs, about as long as the compute
// between two AllReduces of a CPU training step, then a one-element AllReduce. The first rank to arrive
// waits for the last, so per repeat the spread of the ranks' AllReduce times is the skew (profile_fit.cpp).
nlohmann::json measure_sync(const Workload& w, const RankBench& b, Progress& progress) {
  constexpr double kStretchUs = 15'000;
  progress.step("arrival skew", "", 1, 1);
  const Schedule& gemm = *w.interference_gemm->mini;
  const double one_us = median_of(time_compute(b, gemm, 7, true));
  const int per_stretch = std::clamp(int(std::ceil(agree(b.comm, kStretchUs / std::max(one_us, 1.0)))), 1, 1000);
  Schedule stretch = gemms_then_allreduce(gemm, per_stretch);
  fill_with_values(stretch, b.comm.world());
  PreparedProbe probe = b.prepare(std::move(stretch), b.group_ctx(4));
  const int32_t allreduce = int32_t(probe.schedule().ops.size() - 1);
  std::vector<double> allreduce_us;
  for (const auto& spans : probe.run(2, b.options.quick ? 12 : 100, &b.comm))
    for (const OpTiming& t : spans)
      if (t.op == allreduce) allreduce_us.push_back(duration_us(t));
  return {{"stretch_us", per_stretch * one_us}, {"allreduce_us", allreduce_us}};
}

}  // namespace

std::string collective_samples_key(OpKind kind) {
  return kind == OpKind::AllReduce ? "collectives" : to_string(kind);
}

nlohmann::json measure_rank(const Workload& w, GlooComm& comm, const MeasureOptions& o) {
  const std::unique_ptr<Backend> backend = make_backend(o.backend);
  const RankBench bench{o, comm, backend->profiling_traits(),
                        comm.world() > 1 ? agreed_algorithms(*backend, comm) : std::vector<std::string>{}};
  Progress p("domino-profile:", comm.rank() == 0);
  nlohmann::json out;
  out["rank"] = comm.rank();
  nlohmann::json drift;
  out["compute"] = measure_compute(w, bench, p, drift);
  if (!drift.is_null()) out["gemm_drift"] = drift;
  if (comm.world() > 1) {
    measure_collectives(w, bench, p, out);
    out["interference"] = measure_interference(w, bench, p);
    out["sync"] = measure_sync(w, bench, p);
  }
  p.done();
  return out;
}

}  // namespace domino::prof
