// tuner.cpp: per-TP tuning (baselines, plan search, full re-simulation, memory limit) and the choice
// across TP degrees.
#include "tuner/tuner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>

#include "sim/base/error.hpp"
#include "tuner/progress.hpp"

namespace domino {
namespace {

// Predicted gains within this (percent) are ties: far above the rounding of one simulation's sums.
constexpr double kTiePct = 1e-7;

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

// Why plans under sequence parallelism cannot be searched here ("" when they can).
std::string sp_unavailable(const ModelSpec& model, const CostModel& cost) {
  try {
    make_strategy_plan("megatron-sp", model);
  } catch (const Error& e) {
    return e.what();
  }
  if (!cost.has_sp_collectives())
    return fmt::format("profile '{}' has no AllGather / ReduceScatter curves (make them with domino-profile)",
                       cost.profile().name);
  return "";
}

void evaluate_baselines(TpTuning& out, const PlanEvaluator& evaluate, bool sp_available) {
  for (const std::string& name : strategy_names()) {
    Plan plan;
    try {
      plan = make_strategy_plan(name, out.model);
    } catch (const Error&) {
      continue;  // e.g. domino-ds on an odd micro-batch: reported as not applicable
    }
    if (plan.sequence_parallel && !sp_available) continue;
    out.baselines.push_back(evaluate(name, std::move(plan)));
  }
  if (!sp_available) return;
  // The bound of plans under sequence parallelism: their norms and residual adds run on S/tp rows, so they
  // can beat the bound without it.
  Plan bound = make_strategy_plan("megatron-sp", out.model);
  bound.strategy = "no-comm-sp";
  bound.comm_enabled = false;
  out.baselines.push_back(evaluate("no-comm-sp", std::move(bound)));
}

// The reference of the decomposition: megatron-sync's blocks (megatron-sp's under sequence parallelism)
// when the space holds them, else the simplest choices; the constant is the full simulation of the model
// with every block at the reference.
struct DecompositionReference {
  int attn = 0, mlp = 0;
  double iteration_us = 0;
};

DecompositionReference decomposition_reference(const TpTuning& out, const SearchSpace& space, const EvaluatedPlan& sync,
                                               const CostModel& cost) {
  auto ref_index = [](const std::vector<BlockPlan>& list, const BlockPlan& b) {
    const auto it = std::find(list.begin(), list.end(), b);
    return it == list.end() ? 0 : int(it - list.begin());
  };
  DecompositionReference ref;
  ref.attn = ref_index(space.attn, sync.plan.layers.front().attn);
  ref.mlp = ref_index(space.mlp, sync.plan.layers.front().mlp);
  const std::vector<LayerPlan> ref_layers(out.model.layers, LayerPlan{space.attn[ref.attn], space.mlp[ref.mlp]});
  ref.iteration_us =
      sync.plan.layers == ref_layers
          ? sync.figures.iteration_us
          : simulate_plan(out.model, plan_from_blocks(out.model, ref_layers, "reference", space.sequence_parallel), cost)
                .iteration_us;
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

// Every candidate of a space's search and every comm baseline of that space (their choices are in it) on its
// full simulation, appended to the pool, so the tuned plan is never predicted slower than a baseline.
void add_simulated(std::vector<EvaluatedPlan>& pool, const TpTuning& out, const SearchSpace& space,
                   const std::vector<Candidate>& candidates, const PlanEvaluator& evaluate, bool include_baselines) {
  for (const Candidate& c : candidates) {
    EvaluatedPlan e = evaluate("tuned", plan_from_blocks(out.model, c.layers, "tuned", space.sequence_parallel));
    e.predicted_us = c.predicted_us;
    pool.push_back(std::move(e));
  }
  for (const EvaluatedPlan& b : out.baselines) {
    if (!b.plan.comm_enabled || !include_baselines || b.plan.sequence_parallel != space.sequence_parallel) continue;
    EvaluatedPlan e = b;
    e.plan = plan_from_blocks(out.model, b.plan.layers, "tuned", space.sequence_parallel);
    e.label = "tuned";
    pool.push_back(std::move(e));
  }
}

// Fastest first. Stable: equal times keep the search's order (DP order first, then the baselines in their
// order; plans without sequence parallelism before those with it).
void sort_pool(std::vector<EvaluatedPlan>& pool) {
  std::stable_sort(pool.begin(), pool.end(), [](const EvaluatedPlan& a, const EvaluatedPlan& b) {
    return a.figures.iteration_us < b.figures.iteration_us;
  });
}

bool same_plan(const Plan& a, const Plan& b) { return a.layers == b.layers && a.sequence_parallel == b.sequence_parallel; }

// The top_k fastest distinct plans that fit, labelled "tuned #i", and the smallest plan seen.
void pick_top(const std::vector<EvaluatedPlan>& pool, int top_k, TpTuning& out) {
  for (const EvaluatedPlan& e : pool) {
    if (!e.fits || int(out.top.size()) >= top_k) continue;
    const bool dup = std::any_of(out.top.begin(), out.top.end(),
                                 [&](const EvaluatedPlan& t) { return same_plan(t.plan, e.plan); });
    if (!dup) out.top.push_back(e);
  }
  out.smallest = pool.front();
  for (const EvaluatedPlan& e : pool)
    if (e.figures.peak_memory_bytes < out.smallest.figures.peak_memory_bytes) out.smallest = e;
  for (size_t i = 0; i < out.top.size(); ++i) out.top[i].label = fmt::format("tuned #{}", i + 1);
  for (const EvaluatedPlan& e : pool) {
    EvaluatedPlan& best = out.best_by_sp[e.plan.sequence_parallel ? 1 : 0];
    if (e.fits && best.label.empty()) best = e;
  }
}

// --min-gain: an answer departs from what people run only for a predicted gain above the margin, a gain
// within the model's error being no reason to leave a known plan. Megatron-LM's default (megatron-async)
// heads `top` unless the best plan is predicted at least min_gain_pct faster than it; then the fastest named
// strategy that fits and communicates (of the kinds searched) does, unless the search's best beats that one
// by the margin too. Without a margin a named strategy still heads `top` where the search's best is predicted
// to take the very same time (a per-layer variant the model cannot tell from it). The search's plans stay
// listed after it.
struct KeptStrategy {
  const EvaluatedPlan* plan = nullptr;  // null: the search's best stays the answer
  double gain_pct = 0;                  // how much faster the best plan is predicted
  bool tie = false;                     // predicted to take the very same time
};

KeptStrategy strategy_to_keep(const TpTuning& out, double min_gain_pct) {
  const auto eligible = [&](const EvaluatedPlan& b) {
    const bool searched_kind = b.plan.sequence_parallel ? out.sp_searched : out.searched;
    return b.fits && b.plan.comm_enabled && searched_kind;
  };
  const double best_us = out.top.front().figures.iteration_us;
  const auto lead_pct = [&](const EvaluatedPlan& p) { return 100 * (p.figures.iteration_us / best_us - 1); };
  const EvaluatedPlan* megatron = out.baseline("megatron-async");
  if (megatron && eligible(*megatron) && min_gain_pct > 0 && lead_pct(*megatron) < min_gain_pct)
    return {megatron, lead_pct(*megatron), false};
  const EvaluatedPlan* fastest = nullptr;
  for (const EvaluatedPlan& b : out.baselines)
    if (eligible(b) && (!fastest || b.figures.iteration_us < fastest->figures.iteration_us)) fastest = &b;
  if (!fastest) return {};
  const double gain_pct = lead_pct(*fastest);
  const bool tie = std::abs(gain_pct) <= kTiePct;
  if (!tie && !(min_gain_pct > 0 && gain_pct < min_gain_pct)) return {};
  return {fastest, gain_pct, tie};
}

void keep_strategy_within_margin(TpTuning& out, double min_gain_pct, int top_k) {
  if (out.top.empty()) return;
  const KeptStrategy keep = strategy_to_keep(out, min_gain_pct);
  if (!keep.plan) return;
  const EvaluatedPlan& best = out.top.front();
  if (!same_plan(best.plan, keep.plan->plan))
    out.kept_strategy_note =
        keep.tie ? fmt::format("{} kept: {} is predicted to take the same time", keep.plan->label, best.label)
                 : fmt::format("{} kept: {} is predicted {:.1f}% faster, under --min-gain {:g}%",
                               keep.plan->label, best.label, keep.gain_pct, min_gain_pct);
  EvaluatedPlan kept = *keep.plan;
  std::erase_if(out.top, [&](const EvaluatedPlan& t) { return same_plan(t.plan, kept.plan); });
  out.top.insert(out.top.begin(), std::move(kept));
  if (int(out.top.size()) > top_k) out.top.resize(size_t(top_k));
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

namespace {

// Searches one space (without or under sequence parallelism) from its reference baseline and adds the
// full simulations of its candidates and baselines to the pool; returns the search's statistics.
SearchStats search_space(TpTuning& out, const SearchSpace& space, const char* reference, const CostModel& cost,
                         const TuneOptions& options, double limit, const PlanEvaluator& evaluate,
                         std::vector<EvaluatedPlan>& pool, Progress* progress) {
  const EvaluatedPlan* sync = out.baseline(reference);
  if (!sync) throw_runtime(fmt::format("tuner: {} cannot run {} at tp {}", reference, out.model.name, out.model.tp));
  const DecompositionReference ref = decomposition_reference(out, space, *sync, cost);
  if (progress)
    progress->set_stage(fmt::format("tp {}: search{}", out.model.tp, space.sequence_parallel ? " (sequence parallel)" : ""));
  SearchTuning tuning = options.tuning;
  tuning.memory_frontier = limit > 0;
  const PlanSearch search =
      search_plans(out.model, cost, space, ref.attn, ref.mlp, ref.iteration_us, tuning, progress);
  add_simulated(pool, out, space, candidate_plans(search, out.model.layers, limit > 0), evaluate,
                options.search.include_baselines);
  return search.stats;
}

}  // namespace

SpSearch parse_sp_search(const std::string& word) {
  if (word == "auto") return SpSearch::Auto;
  if (word == "on") return SpSearch::On;
  if (word == "off") return SpSearch::Off;
  throw_bad_input(fmt::format("--sp: unknown value '{}' (expected auto, on, off)", word));
}

TpTuning tune_tp(const ModelSpec& model, const CostModel& cost, const TuneOptions& options, Progress* progress) {
  const auto t0 = std::chrono::steady_clock::now();
  TpTuning out;
  out.model = model;
  validate_model(out.model);
  const double limit = options.mem_limit_gib > 0 ? options.mem_limit_gib * kGiB : 0;
  const PlanEvaluator evaluate(out, cost, limit);
  const std::string sp_why = options.sequence_parallel == SpSearch::Off ? "" : sp_unavailable(out.model, cost);
  if (options.sequence_parallel == SpSearch::On && !sp_why.empty())
    throw_bad_input("--sp on: sequence parallelism cannot be tuned here: " + sp_why);
  out.sp_note = sp_why;
  out.searched = options.sequence_parallel != SpSearch::On;
  out.sp_searched = options.sequence_parallel != SpSearch::Off && sp_why.empty();
  out.space = make_search_space(out.model, options.search);

  if (progress) progress->set_stage(fmt::format("tp {}: baselines", model.tp));
  evaluate_baselines(out, evaluate, out.sp_searched);
  std::vector<EvaluatedPlan> pool;
  if (out.searched)
    out.stats = search_space(out, out.space, "megatron-sync", cost, options, limit, evaluate, pool, progress);
  if (out.sp_searched) {
    out.sp_space = make_search_space(out.model, options.search, /*sequence_parallel=*/true);
    out.sp_stats = search_space(out, out.sp_space, "megatron-sp", cost, options, limit, evaluate, pool, progress);
  }
  sort_pool(pool);
  pick_top(pool, options.top_k, out);
  keep_strategy_within_margin(out, options.min_gain_pct, options.top_k);
  out.seconds = seconds_since(t0);
  return out;
}

TuneResult tune(const ModelSpec& model, const std::vector<int>& tps, const CostModel& cost, const TuneOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  if (options.top_k < 1) throw_bad_input("--top must be at least 1");
  if (!(options.min_gain_pct >= 0 && options.min_gain_pct < 100))
    throw_bad_input(fmt::format("--min-gain {}: a percentage in [0, 100)", options.min_gain_pct));
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
  if (result.best_tp < 0 && !options.allow_nothing_fits) throw_nothing_fits(result.per_tp, options);
  result.seconds = seconds_since(t0);
  return result;
}

}  // namespace domino
