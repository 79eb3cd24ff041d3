// tune_bench.cpp: how long domino-tune's search takes on the reference cases (Llama-2 70B,
// 80 layers, full search space, one core): one TP degree (target < 2 s) and three (target < 6 s); and the
// full search (every pair of choices) on the same space with its budget lifted, to show what it costs.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "sim/cost/profile.hpp"
#include "tuner/tuner.hpp"

namespace {

using namespace domino;

std::string source(const std::string& rel) { return std::string(DOMINO_SOURCE_DIR) + "/" + rel; }

void run(benchmark::State& state, const std::string& model_name, const std::vector<int>& tps,
         const std::string& profile, long full_search_probe_limit = SearchTuning{}.full_search_probe_limit) {
  const ModelSpec model = load_model(source("configs/models/" + model_name + ".yaml"));
  const CostModel cost(load_profile(source("profiles/" + profile + ".yaml")));
  TuneOptions options;
  options.progress = false;
  options.tuning.full_search_probe_limit = full_search_probe_limit;
  double simulations = 0, best_us = 0;
  for (auto _ : state) {
    const TuneResult r = tune(model, tps, cost, options);
    simulations = 0;
    for (const TpTuning& t : r.per_tp) simulations += double(t.stats.probe_simulations + t.full_simulations);
    best_us = r.best().figures.iteration_us;
  }
  state.counters["simulations"] = simulations;
  state.counters["best_iteration_ms"] = best_us / 1000.0;
  state.counters["sims_per_s"] = benchmark::Counter(simulations * double(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_TuneLlama70bTp8(benchmark::State& state) { run(state, "llama2-70b", {8}, "dgx-h100"); }
void BM_TuneLlama70bTp4_8_16(benchmark::State& state) { run(state, "llama2-70b", {4, 8, 16}, "h100-multinode"); }
void BM_TuneGpt3_13bTp8(benchmark::State& state) { run(state, "gpt3-13b", {8}, "dgx-h100"); }
void BM_TuneLlama70bTp8FullSearch(benchmark::State& state) {
  run(state, "llama2-70b", {8}, "dgx-h100", 1L << 40);
}

// Few iterations: each run is a whole search (about a second) and the machines are shared.
BENCHMARK(BM_TuneLlama70bTp8)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_TuneLlama70bTp4_8_16)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(BM_TuneGpt3_13bTp8)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_TuneLlama70bTp8FullSearch)->Unit(benchmark::kMillisecond)->Iterations(1);  // several seconds

}  // namespace

BENCHMARK_MAIN();
