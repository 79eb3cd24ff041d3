// preflight.cpp: the facts (backend footprint, free memory, CPUs) and the judgement of domino-exec's preflight
// (see preflight.hpp).
#include "executor/job/preflight.hpp"

#include <cstdio>

#include "executor/runtime/cpu_placement.hpp"
#include "sim/base/error.hpp"

namespace domino {
namespace {

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", bytes / double(int64_t(1) << 30));
  return text;
}

std::string ranks_text(size_t n) { return std::to_string(n) + (n == 1 ? " rank" : " ranks"); }

void judge_memory(const HostFootprint& f, PreflightVerdict* v) {
  for (const MemoryPool& pool : f.pools) {
    const size_t n = pool.local_ranks.size();
    const double need = double(f.bytes_per_rank) * double(n);
    if (n == 0 || need <= double(pool.available_bytes)) continue;
    v->refusals.push_back("the plan needs " + ranks_text(n) + " x " + gib(double(f.bytes_per_rank)) + " = " +
                          gib(need) + ", " + pool.name + " has " + gib(double(pool.available_bytes)) + " " +
                          pool.measure);
  }
}

void judge_cores(const PreflightFacts& facts, PreflightVerdict* v) {
  const int ranks = facts.ranks_on_cores, threads = facts.footprint.busy_threads_per_rank;
  if (ranks > facts.cpus && !facts.timed) {
    v->warnings.push_back("the check runs " + ranks_text(size_t(ranks)) + " on " + std::to_string(facts.cpus) +
                          " CPU(s) (" + facts.cpus_source + "): correct, but slower than one rank per core");
    return;
  }
  if (ranks > facts.cpus) {
    v->refusals.push_back("the plan runs " + ranks_text(size_t(ranks)) + " on " + std::to_string(facts.cpus) +
                          " CPU(s) (" + facts.cpus_source + "): every rank needs a core of its own, or its "
                          "compute and collectives wait for one and every measured time is wrong");
    return;
  }
  if (int64_t(ranks) * threads > facts.cpus)
    v->warnings.push_back(ranks_text(size_t(ranks)) + " x " + std::to_string(threads) + " threads = " +
                          std::to_string(int64_t(ranks) * threads) + " busy threads on " +
                          std::to_string(facts.cpus) + " CPU(s) (" + facts.cpus_source +
                          "): the threads time-share cores, so the run is slower than this machine can be");
}

// CPUs in this process's affinity mask, and whether that mask is narrower than the online CPUs (a launcher
// bound the process to some cores).
struct CpuMask {
  int cpus = 1;
  bool bound = false;
};

CpuMask cpu_mask() {
  const std::vector<int> cpus = affinity_cpus();
  if (cpus.empty()) return {};
  return {int(cpus.size()), bound_by_launcher(cpus)};
}

// One rank holds every job's buffers; the pools and the busy threads are the backend's, whichever the job.
HostFootprint footprint_of(const Backend& backend, const std::vector<const Job*>& jobs, int threads,
                           const HostRanks& ranks) {
  HostFootprint f = backend.host_footprint(jobs.at(0)->schedule, threads, ranks);
  for (size_t i = 1; i < jobs.size(); ++i)
    f.bytes_per_rank += backend.host_footprint(jobs[i]->schedule, threads, ranks).bytes_per_rank;
  return f;
}

// "tiny-gpt (domino-ds, tp 2)"; with several plans their strategies in order.
std::string jobs_text(const std::vector<const Job*>& jobs) {
  std::string strategies;
  for (const Job* job : jobs) strategies += (strategies.empty() ? "" : ", ") + job->plan.strategy;
  const ModelSpec& model = jobs.at(0)->model;
  return model.name + " (" + strategies + ", tp " + std::to_string(model.tp) + ")";
}

}  // namespace

PreflightVerdict judge_preflight(const PreflightFacts& facts) {
  PreflightVerdict v;
  judge_memory(facts.footprint, &v);
  judge_cores(facts, &v);
  return v;
}

HostRanks launcher_host_ranks(int ranks) {
  HostRanks h;
  for (int r = 0; r < ranks; ++r) h.local_ranks.push_back(r);
  return h;
}

HostRanks env_host_ranks(const LaunchEnv& launch) {
  HostRanks h;
  h.self = launch.local_rank >= 0 ? launch.local_rank : launch.rank;
  if (launch.local_world > 0) {
    for (int r = 0; r < launch.local_world; ++r) h.local_ranks.push_back(r);
  } else {
    h.local_ranks.push_back(h.self);
  }
  return h;
}

void run_preflight(const ExecOptions& options, const Backend& backend, const std::vector<const Job*>& jobs,
                   const HostRanks& ranks) {
  if (!options.run.preflight) return;
  PreflightFacts facts;
  facts.footprint = footprint_of(backend, jobs, options.run.threads, ranks);
  const CpuMask mask = cpu_mask();
  facts.cpus = mask.cpus;
  // A rank an outside launcher bound to its own cores shares them with no other rank.
  const bool alone = ranks.self >= 0 && mask.bound;
  facts.ranks_on_cores = alone ? 1 : int(ranks.local_ranks.size());
  facts.cpus_source = alone ? "this rank's affinity mask" : "this process's affinity mask";
  facts.timed = !options.run.check;
  const PreflightVerdict verdict = judge_preflight(facts);
  for (const std::string& w : verdict.warnings) std::fprintf(stderr, "domino-exec: warning: %s\n", w.c_str());
  if (verdict.refusals.empty()) return;
  std::string message = jobs_text(jobs) + " on the " + backend.name() + " backend does not fit this host: ";
  for (size_t i = 0; i < verdict.refusals.size(); ++i) message += (i ? "; " : "") + verdict.refusals[i];
  throw_bad_input(message + " (--no-preflight skips this check)");
}

}  // namespace domino
