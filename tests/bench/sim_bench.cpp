// sim_bench.cpp: how fast the tuner's inner loop is: building the schedule IR and simulating it, for
// several models and plans (the target: Llama-2 70B, 80 layers, p=4 q=2, build + simulate under 5 ms on
// one core), the simulation alone, and one cost-model call. Reports simulated ops per second.
#include <benchmark/benchmark.h>

#include <filesystem>

#include "sim/cost/cost_model.hpp"
#include "sim/engine/simulator.hpp"

namespace domino {
namespace {

const CostModel& h100() {
  static const CostModel cm(load_profile((std::filesystem::path(DOMINO_SOURCE_DIR) / "profiles" / "dgx-h100.yaml").string()));
  return cm;
}

struct Case {
  const char* model;
  int tp;
  const char* strategy;  // a named strategy, or "p4q2" for batch p=4, q=2, inter-layer overlap everywhere
};

const Case kCases[] = {
    {"cpu-gpt", 2, "domino-ds"},        {"gpt3-13b", 8, "megatron-sync"}, {"gpt3-13b", 8, "domino-ds"},
    {"llama2-70b", 8, "megatron-sync"}, {"llama2-70b", 8, "domino-deep"}, {"llama2-70b", 8, "p4q2"},
};

Plan plan_for(const Case& c, const ModelSpec& m) {
  if (std::string(c.strategy) != "p4q2") return make_strategy_plan(c.strategy, m);
  const BlockPlan block{SplitDim::Batch, 4, 2, OverlapMode::Inter, true};
  return make_uniform_plan(m, block, block, "p4q2");
}

ModelSpec model_for(const Case& c) {
  ModelOverrides o;
  o.tp = c.tp;
  return load_model(c.model, o);
}

void label(benchmark::State& state, const Case& c) {
  state.SetLabel(std::string(c.model) + " tp" + std::to_string(c.tp) + " " + c.strategy);
}

void BM_BuildAndSimulate(benchmark::State& state) {
  const Case& c = kCases[state.range(0)];
  const ModelSpec m = model_for(c);
  const Plan plan = plan_for(c, m);
  size_t ops = 0;
  for (auto _ : state) {
    const Schedule s = build_schedule(m, plan);
    const SimResult r = simulate(s, h100(), SimOptions{false});
    benchmark::DoNotOptimize(r.iteration_us);
    ops = s.ops.size();
  }
  label(state, c);
  state.counters["ops"] = double(ops);
  state.counters["ops_per_s"] = benchmark::Counter(double(ops) * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_SimulateOnly(benchmark::State& state) {
  const Case& c = kCases[state.range(0)];
  const ModelSpec m = model_for(c);
  const Schedule s = build_schedule(m, plan_for(c, m));
  for (auto _ : state) {
    const SimResult r = simulate(s, h100(), SimOptions{false});
    benchmark::DoNotOptimize(r.iteration_us);
  }
  label(state, c);
  state.counters["ops"] = double(s.ops.size());
  state.counters["ops_per_s"] = benchmark::Counter(double(s.ops.size()) * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_SimulateWithTimeline(benchmark::State& state) {
  const Case& c = kCases[state.range(0)];
  const ModelSpec m = model_for(c);
  const Schedule s = build_schedule(m, plan_for(c, m));
  for (auto _ : state) {
    const SimResult r = simulate(s, h100());
    benchmark::DoNotOptimize(r.timeline.spans.data());
  }
  label(state, c);
  state.counters["ops_per_s"] = benchmark::Counter(double(s.ops.size()) * state.iterations(), benchmark::Counter::kIsRate);
}

// One op_us call per op of a real schedule, round robin: the per-op cost the tuner pays.
void BM_OpCost(benchmark::State& state) {
  const ModelSpec m = load_model("llama2-70b");
  const Schedule s = build_schedule(m, make_strategy_plan("domino-deep", m));  // domino-ds refuses Llama
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(h100().op_us(s.ops[i], m.tp, 8));
    if (++i == s.ops.size()) i = 0;
  }
  state.counters["ops_per_s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}

constexpr int kNumCases = sizeof(kCases) / sizeof(kCases[0]);
BENCHMARK(BM_BuildAndSimulate)->DenseRange(0, kNumCases - 1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SimulateOnly)->DenseRange(0, kNumCases - 1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SimulateWithTimeline)->Arg(5)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_OpCost);

}  // namespace
}  // namespace domino

BENCHMARK_MAIN();
