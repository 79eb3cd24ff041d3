// tune_bench.cpp: how long domino-tune's search takes on the reference cases (Llama-2 70B, 80 layers, full
// search space, one core): one TP degree and three, GPT-3 13B; and the full search (every pair of choices)
// with its budget lifted, with and without one probe build per class of choices. The plans without sequence
// parallelism unless a benchmark says otherwise (with it, a second search runs: --sp auto).
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "sim/cost/profile.hpp"
#include "tuner/tuner.hpp"

namespace {

using namespace domino;

std::string source(const std::string& rel) { return std::string(DOMINO_SOURCE_DIR) + "/" + rel; }

void run(benchmark::State& state, const std::string& model_name, const std::vector<int>& tps,
         const std::string& profile, long full_search_probe_limit = SearchTuning{}.full_search_probe_limit,
         bool probe_classes = true, SpSearch sp = SpSearch::Off) {
  const ModelSpec model = load_model(source("configs/models/" + model_name + ".yaml"));
  const CostModel cost(load_profile(source("profiles/" + profile + ".yaml")));
  TuneOptions options;
  options.progress = false;
  options.tuning.full_search_probe_limit = full_search_probe_limit;
  options.tuning.probe_classes = probe_classes;
  options.sequence_parallel = sp;
  double simulations = 0, best_us = 0;
  for (auto _ : state) {
    const TuneResult r = tune(model, tps, cost, options);
    simulations = 0;
    for (const TpTuning& t : r.per_tp)
      simulations += double(t.stats.probe_simulations + t.sp_stats.probe_simulations + t.full_simulations);
    best_us = r.best().figures.iteration_us;
  }
  state.counters["simulations"] = simulations;
  state.counters["best_iteration_ms"] = best_us / 1000.0;
  state.counters["sims_per_s"] = benchmark::Counter(simulations * double(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_TuneLlama70bTp8(benchmark::State& state) { run(state, "llama2-70b", {8}, "dgx-h100"); }
void BM_TuneLlama70bTp4_8_16(benchmark::State& state) { run(state, "llama2-70b", {4, 8, 16}, "h100-multinode"); }
void BM_TuneGpt3_13bTp8(benchmark::State& state) { run(state, "gpt3-13b", {8}, "dgx-h100"); }
// What domino-tune does by default: both searches, without and under sequence parallelism.
void BM_TuneLlama70bTp8WithAndWithoutSp(benchmark::State& state) {
  run(state, "llama2-70b", {8}, "dgx-h100", SearchTuning{}.full_search_probe_limit, true, SpSearch::Auto);
}
// The product requirement: the full search (every block choice, every pair, no screening) of Llama-2 70B at
// TP 8 on one core in under 0.5 s; and the same search building every probe's schedule (the old way: the
// same figures), to read the ratio from one run on a shared machine.
void BM_TuneLlama70bTp8FullSearch(benchmark::State& state) { run(state, "llama2-70b", {8}, "dgx-h100", 1L << 40); }
void BM_TuneLlama70bTp8FullSearchEveryProbeBuilt(benchmark::State& state) {
  run(state, "llama2-70b", {8}, "dgx-h100", 1L << 40, false);
}

// Few iterations: each run is a whole search (about a second) and the machines are shared.
BENCHMARK(BM_TuneLlama70bTp8)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_TuneLlama70bTp4_8_16)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(BM_TuneGpt3_13bTp8)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_TuneLlama70bTp8WithAndWithoutSp)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_TuneLlama70bTp8FullSearch)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_TuneLlama70bTp8FullSearchEveryProbeBuilt)->Unit(benchmark::kMillisecond)->Iterations(1);  // seconds

}  // namespace

BENCHMARK_MAIN();
