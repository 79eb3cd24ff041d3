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

// Full simulations of plans for one TP degree, counted, each marked whether it fits the memory limit.
class PlanEvaluator {
 public:
  PlanEvaluator(TpTuning& out, const CostModel& cost, double limit_bytes)
      : out_(out), cost_(cost), limit_(limit_bytes) {}
  EvaluatedPlan operator()(const std::string& label, Plan plan) const {
    EvaluatedPlan e;
    e.label = label;
    e.plan = std::move(plan);
    e.figures = simulate_plan(out_.model, e.plan, cost_);
    e.throughput = throughput(out_.model, cost_.profile(), e.figures.iteration_us);
    e.fits = limit_ <= 0 || double(e.figures.peak_memory_bytes) <= limit_;
    ++out_.full_simulations;
    return e;
  }

 private:
  TpTuning& out_;
  const CostModel& cost_;
  double limit_;
};

void evaluate_baselines(TpTuning& out, const PlanEvaluator& evaluate) {
  for (const std::string& name : strategy_names()) {
    Plan plan;
    try {
      plan = make_strategy_plan(name, out.model);
    } catch (const Error&) {
      continue;  // e.g. domino-ds on an odd micro-batch: reported as not applicable
    }
    out.baselines.push_back(evaluate(name, std::move(plan)));
  }
}

// The reference of the decomposition: megatron-sync's blocks when the space holds them, else the simplest
// choices; the constant is the full simulation of the model with every block at the reference.
struct DecompositionReference {
  int attn = 0, mlp = 0;
  double iteration_us = 0;
};

DecompositionReference decomposition_reference(const TpTuning& out, const EvaluatedPlan& sync, const CostModel& cost) {
  auto ref_index = [](const std::vector<BlockPlan>& list, const BlockPlan& b) {
    const auto it = std::find(list.begin(), list.end(), b);
    return it == list.end() ? 0 : int(it - list.begin());
  };
  DecompositionReference ref;
  ref.attn = ref_index(out.space.attn, sync.plan.layers.front().attn);
  ref.mlp = ref_index(out.space.mlp, sync.plan.layers.front().mlp);
  const std::vector<LayerPlan> ref_layers(out.model.layers, LayerPlan{out.space.attn[ref.attn], out.space.mlp[ref.mlp]});
  ref.iteration_us = sync.plan.layers == ref_layers
                         ? sync.figures.iteration_us
                         : simulate_plan(out.model, plan_from_blocks(out.model, ref_layers, "reference"), cost).iteration_us;
  return ref;
}

void add_unseen(std::vector<Candidate>& candidates, const Candidate& c) {
  const bool seen = std::any_of(candidates.begin(), candidates.end(), [&](const Candidate& x) { return x.layers == c.layers; });
  if (!seen) candidates.push_back(c);
}

// The shortlist, then the uniform version of each shortlisted plan's most common layer: a cheap guard for
// models where the chain decomposition is only approximate (its error shows as search_predicted_us vs the
// simulation). Under a memory limit the fastest plans may not fit: leaner alternatives compete too.
std::vector<Candidate> candidate_plans(const PlanSearch& search, int layers, bool memory_limited) {
  std::vector<Candidate> candidates = search.shortlist;
  for (const Candidate& c : search.shortlist) {
    std::map<LayerPlan, int> count;
    for (const LayerPlan& l : c.layers) ++count[l];
    const LayerPlan common =
        std::max_element(count.begin(), count.end(), [](const auto& a, const auto& b) { return a.second < b.second; })->first;
    Candidate u;
    u.layers.assign(layers, common);
    u.predicted_us = std::numeric_limits<double>::quiet_NaN();  // not the search's own pick
    add_unseen(candidates, u);
  }
  if (memory_limited)
    for (const Candidate& c : search.memory_frontier) add_unseen(candidates, c);
  return candidates;
}

// Every candidate and every comm baseline (their choices are in the space) on its full simulation, fastest
// first, so the tuned plan is never predicted slower than a baseline.
std::vector<EvaluatedPlan> simulated_pool(const TpTuning& out, const std::vector<Candidate>& candidates,
                                          const PlanEvaluator& evaluate, bool include_baselines) {
  std::vector<EvaluatedPlan> pool;
  for (const Candidate& c : candidates) {
    EvaluatedPlan e = evaluate("tuned", plan_from_blocks(out.model, c.layers, "tuned"));
    e.predicted_us = c.predicted_us;
    pool.push_back(std::move(e));
  }
  for (const EvaluatedPlan& b : out.baselines) {
    if (!b.plan.comm_enabled || !include_baselines) continue;
    EvaluatedPlan e = b;
    e.plan = plan_from_blocks(out.model, b.plan.layers, "tuned");
    e.label = "tuned";
    pool.push_back(std::move(e));
  }
  // Stable: equal times keep the search's order (DP order first, then the baselines in their order).
  std::stable_sort(pool.begin(), pool.end(), [](const EvaluatedPlan& a, const EvaluatedPlan& b) {
    return a.figures.iteration_us < b.figures.iteration_us;
  });
  return pool;
}

// The top_k fastest distinct plans that fit, labelled "tuned #i", and the smallest plan seen.
void pick_top(const std::vector<EvaluatedPlan>& pool, int top_k, TpTuning& out) {
  for (const EvaluatedPlan& e : pool) {
    if (!e.fits || int(out.top.size()) >= top_k) continue;
    const bool dup = std::any_of(out.top.begin(), out.top.end(),
                                 [&](const EvaluatedPlan& t) { return t.plan.layers == e.plan.layers; });
    if (!dup) out.top.push_back(e);
  }
  out.smallest = pool.front();
  for (const EvaluatedPlan& e : pool)
    if (e.figures.peak_memory_bytes < out.smallest.figures.peak_memory_bytes) out.smallest = e;
  for (size_t i = 0; i < out.top.size(); ++i) out.top[i].label = fmt::format("tuned #{}", i + 1);
}

// The degree whose fastest fitting plan trains the most tokens per second per GPU; -1 when none fits.
int best_by_tokens_per_gpu(const std::vector<TpTuning>& per_tp) {
  int best = -1;
  for (int i = 0; i < int(per_tp.size()); ++i) {
    if (per_tp[i].top.empty()) continue;
    if (best < 0 || per_tp[i].top.front().throughput.tokens_per_s_per_gpu >
                        per_tp[best].top.front().throughput.tokens_per_s_per_gpu)
      best = i;
  }
  return best;
}

[[noreturn]] void throw_nothing_fits(const std::vector<TpTuning>& per_tp, const TuneOptions& options) {
  const EvaluatedPlan* smallest = nullptr;
  const TpTuning* at = nullptr;
  for (const TpTuning& t : per_tp) {
    if (!smallest || t.smallest.figures.peak_memory_bytes < smallest->figures.peak_memory_bytes) {
      smallest = &t.smallest;
      at = &t;
    }
  }
  const TrainingContext& training = at->model.training;
  const std::string hint = training.zero == 0
                               ? "raise --mem-gb, shard the optimizer state over the data-parallel ranks (--dp N "
                                 "--zero 1), or try a larger --tp"
                               : "raise --mem-gb, raise --dp, or try a larger --tp";
  throw_bad_input(fmt::format("no plan fits {:g} GiB per device (--mem-gb): the smallest needs {:.1f} GiB (tp {}, {}; "
                              "{}); {}",
                              options.mem_limit_gib, double(smallest->figures.peak_memory_bytes) / kGiB, at->model.tp,
                              layer_label(smallest->plan.layers.front()), training_summary(training), hint));
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
  const PlanEvaluator evaluate(out, cost, limit);

  if (progress) progress->set_stage(fmt::format("tp {}: baselines", model.tp));
  evaluate_baselines(out, evaluate);
  const EvaluatedPlan* sync = out.baseline("megatron-sync");
  if (!sync) throw_runtime(fmt::format("tuner: megatron-sync cannot run {} at tp {}", model.name, model.tp));
  const DecompositionReference ref = decomposition_reference(out, *sync, cost);

  if (progress) progress->set_stage(fmt::format("tp {}: search", model.tp));
  SearchTuning tuning = options.tuning;
  tuning.memory_frontier = limit > 0;
  const PlanSearch search =
      search_plans(out.model, cost, out.space, ref.attn, ref.mlp, ref.iteration_us, tuning, progress);
  out.stats = search.stats;

  const std::vector<Candidate> candidates = candidate_plans(search, model.layers, limit > 0);
  pick_top(simulated_pool(out, candidates, evaluate, options.search.include_baselines), options.top_k, out);
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
  result.best_tp = best_by_tokens_per_gpu(result.per_tp);
  if (result.best_tp < 0) throw_nothing_fits(result.per_tp, options);
  result.seconds = seconds_since(t0);
  return result;
}

}  // namespace domino
