// tuner.cpp: per-TP tuning (baselines, plan search, full re-simulation, memory limit) and the choice
// across TP degrees.
#include "tuner/tuner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>

#include "sim/base/error.hpp"
#include "tuner/progress.hpp"

namespace domino {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

const EvaluatedPlan* TpTuning::baseline(const std::string& name) const {
  for (const EvaluatedPlan& b : baselines)
    if (b.label == name) return &b;
  return nullptr;
}

TpTuning tune_tp(const ModelSpec& model, const CostModel& cost, const TuneOptions& options, Progress* progress) {
  const auto t0 = std::chrono::steady_clock::now();
  TpTuning out;
  out.model = model;
  validate_model(out.model);
  out.space = make_search_space(out.model, options.search);
  const double limit = options.mem_limit_gib > 0 ? options.mem_limit_gib * kGiB : 0;
  auto fits = [&](const SimFigures& f) { return limit <= 0 || double(f.peak_memory_bytes) <= limit; };
  auto evaluate = [&](const std::string& label, Plan plan) {
    EvaluatedPlan e;
    e.label = label;
    e.plan = std::move(plan);
    e.figures = simulate_plan(out.model, e.plan, cost);
    e.fits = fits(e.figures);
    ++out.full_simulations;
    return e;
  };

  if (progress) progress->set_stage(fmt::format("tp {}: baselines", model.tp));
  for (const std::string& name : strategy_names()) {
    Plan plan;
    try {
      plan = make_strategy_plan(name, out.model);
    } catch (const Error&) {
      continue;  // e.g. domino-ds on an odd micro-batch: reported as not applicable
    }
    out.baselines.push_back(evaluate(name, std::move(plan)));
  }
  const EvaluatedPlan* sync = out.baseline("megatron-sync");
  if (!sync) throw_runtime(fmt::format("tuner: megatron-sync cannot run {} at tp {}", model.name, model.tp));

  // The reference of the decomposition: megatron-sync's blocks when the space holds them, else the
  // simplest choices; the constant is the full simulation of the model with every block at the reference.
  auto ref_index = [](const std::vector<BlockPlan>& list, const BlockPlan& b) {
    const auto it = std::find(list.begin(), list.end(), b);
    return it == list.end() ? 0 : int(it - list.begin());
  };
  const int ref_attn = ref_index(out.space.attn, sync->plan.layers.front().attn);
  const int ref_mlp = ref_index(out.space.mlp, sync->plan.layers.front().mlp);
  const std::vector<LayerPlan> ref_layers(model.layers, LayerPlan{out.space.attn[ref_attn], out.space.mlp[ref_mlp]});
  const double reference_us = sync->plan.layers == ref_layers
                                  ? sync->figures.iteration_us
                                  : simulate_plan(out.model, plan_from_blocks(out.model, ref_layers, "reference"), cost).iteration_us;

  if (progress) progress->set_stage(fmt::format("tp {}: search", model.tp));
  SearchTuning tuning = options.tuning;
  tuning.memory_frontier = limit > 0;
  const PlanSearch search = search_plans(out.model, cost, out.space, ref_attn, ref_mlp, reference_us, tuning, progress);
  out.stats = search.stats;

  // Every shortlisted plan and every comm baseline (their choices are in the space) competes on its
  // full simulation, so the tuned plan is never predicted slower than a baseline.
  std::vector<EvaluatedPlan> pool;
  std::vector<Candidate> candidates = search.shortlist;
  // The uniform version of each shortlisted plan's most common layer: a cheap guard for models where the
  // chain decomposition is only approximate (its error shows as search_predicted_us vs the simulation).
  for (const Candidate& c : search.shortlist) {
    std::map<LayerPlan, int> count;
    for (const LayerPlan& l : c.layers) ++count[l];
    const LayerPlan common =
        std::max_element(count.begin(), count.end(), [](const auto& a, const auto& b) { return a.second < b.second; })->first;
    Candidate u;
    u.layers.assign(model.layers, common);
    u.predicted_us = std::numeric_limits<double>::quiet_NaN();  // not the search's own pick
    const bool seen = std::any_of(candidates.begin(), candidates.end(), [&](const Candidate& x) { return x.layers == u.layers; });
    if (!seen) candidates.push_back(u);
  }
  if (limit > 0) {
    // Under a memory limit the fastest plans may not fit: leaner alternatives compete too.
    for (const Candidate& c : search.memory_frontier) {
      const bool seen = std::any_of(candidates.begin(), candidates.end(), [&](const Candidate& x) { return x.layers == c.layers; });
      if (!seen) candidates.push_back(c);
    }
  }
  for (const Candidate& c : candidates) {
    EvaluatedPlan e = evaluate("tuned", plan_from_blocks(out.model, c.layers, "tuned"));
    e.predicted_us = c.predicted_us;
    pool.push_back(std::move(e));
  }
  for (const EvaluatedPlan& b : out.baselines) {
    if (!b.plan.comm_enabled || !options.search.include_baselines) continue;
    EvaluatedPlan e = b;
    e.plan = plan_from_blocks(out.model, b.plan.layers, "tuned");
    e.label = "tuned";
    pool.push_back(std::move(e));
  }
  // Stable: equal times keep the search's order (DP order first, then the baselines in their order).
  std::stable_sort(pool.begin(), pool.end(), [](const EvaluatedPlan& a, const EvaluatedPlan& b) {
    return a.figures.iteration_us < b.figures.iteration_us;
  });
  for (EvaluatedPlan& e : pool) {
    if (!e.fits || int(out.top.size()) >= options.top_k) continue;
    const bool dup = std::any_of(out.top.begin(), out.top.end(),
                                 [&](const EvaluatedPlan& t) { return t.plan.layers == e.plan.layers; });
    if (!dup) out.top.push_back(e);
  }
  // The smallest plan seen, for the "nothing fits" message.
  out.smallest = pool.front();
  for (const EvaluatedPlan& e : pool)
    if (e.figures.peak_memory_bytes < out.smallest.figures.peak_memory_bytes) out.smallest = e;
  for (size_t i = 0; i < out.top.size(); ++i) out.top[i].label = fmt::format("tuned #{}", i + 1);
  out.seconds = seconds_since(t0);
  return out;
}

TuneResult tune(const ModelSpec& model, const std::vector<int>& tps, const CostModel& cost, const TuneOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  if (options.top_k < 1) throw_bad_input("--top must be at least 1");
  TuneResult result;
  result.profile = cost.profile().name;
  Progress progress(options.progress);
  std::vector<int> degrees = tps.empty() ? std::vector<int>{model.tp} : tps;
  for (int tp : degrees) {
    if (tp < 1) throw_bad_input(fmt::format("--tp {}: the TP degree must be positive", tp));
    ModelSpec m = model;
    m.tp = tp;
    result.per_tp.push_back(tune_tp(m, cost, options, &progress));
  }
  progress.finish();
  for (int i = 0; i < int(result.per_tp.size()); ++i) {
    const TpTuning& t = result.per_tp[i];
    if (t.top.empty()) continue;
    if (result.best_tp < 0 ||
        t.top.front().figures.iteration_us < result.per_tp[result.best_tp].top.front().figures.iteration_us)
      result.best_tp = i;
  }
  if (result.best_tp < 0) {
    const EvaluatedPlan* smallest = nullptr;
    int smallest_tp = 0;
    for (const TpTuning& t : result.per_tp) {
      if (!smallest || t.smallest.figures.peak_memory_bytes < smallest->figures.peak_memory_bytes) {
        smallest = &t.smallest;
        smallest_tp = t.model.tp;
      }
    }
    throw_bad_input(fmt::format(
        "no plan fits {:g} GiB per device (--mem-gb): the smallest needs {:.1f} GiB (tp {}, {}); raise --mem-gb, "
        "or try a larger --tp",
        options.mem_limit_gib, double(smallest->figures.peak_memory_bytes) / kGiB, smallest_tp,
        layer_label(smallest->plan.layers.front())));
  }
  result.seconds = seconds_since(t0);
  return result;
}

}  // namespace domino
