// tuner.hpp: domino-tune's engine: for each TP degree, the baselines, the plan search and the full
// re-simulation of its best plans under the memory limit; the overall best across TP degrees.
#pragma once

#include <array>
#include <limits>
#include <string>
#include <vector>

#include "sim/engine/throughput.hpp"
#include "tuner/plan_search.hpp"

namespace domino {

// Whether plans under sequence parallelism (Plan::sequence_parallel) are searched: auto searches them beside
// the others wherever the model and the profile support them, on searches only them, off never.
enum class SpSearch { Auto, On, Off };
SpSearch parse_sp_search(const std::string& word);

// domino-tune's --min-gain when none is given (percent): the plan-to-plan error the cost model has shown on
// measured launches (its in-launch speedups over megatron-async off by 1.4-2.2 points on average), below
// which a predicted lead over a known plan is no evidence of a real one (docs/tuner.md).
inline constexpr double kDefaultMinGainPct = 2;

struct TuneOptions {
  SearchOptions search;
  SpSearch sequence_parallel = SpSearch::Auto;
  SearchTuning tuning;
  int top_k = 5;              // tuned plans reported
  double mem_limit_gib = 0;   // peak memory per device; 0: no limit
  // A margin for the cost model's error on the machine at hand (percent): megatron-async stays the answer
  // unless the best plan is predicted at least this much faster, then the fastest named strategy unless the
  // search's best is; 0: the fastest plan wins (a searched plan that ties a named strategy excepted).
  double min_gain_pct = 0;
  bool progress = true;       // progress line on stderr (only when it is a terminal)
  // true: when no plan fits mem_limit_gib, tune returns with best_tp -1 (each TpTuning's smallest says what
  // the leanest plan needed) instead of throwing BadInput.
  bool allow_nothing_fits = false;
};

struct EvaluatedPlan {
  std::string label;  // "tuned #1", "megatron-sync", ...
  Plan plan;
  SimFigures figures;  // full simulation
  Throughput throughput;  // tokens/s per GPU and MFU of figures.iteration_us
  double predicted_us = std::numeric_limits<double>::quiet_NaN();  // the search's own figure (tuned plans)
  bool fits = true;   // within the memory limit
};

struct TpTuning {
  ModelSpec model;  // with this TP degree
  SearchSpace space;     // the plans without sequence parallelism
  SearchSpace sp_space;  // under sequence parallelism (searched when sp_searched)
  bool searched = false, sp_searched = false;
  std::string sp_note;   // why sequence parallelism was not searched ("" when it was or was not asked)
  std::vector<EvaluatedPlan> top;        // fitting plans, fastest first (at most top_k)
  // The named strategies that run here (megatron-sync, ..., no-comm; megatron-sp, megatron-sp-overlap and the
  // no-comm-sp bound where sequence parallelism is searched).
  std::vector<EvaluatedPlan> baselines;
  EvaluatedPlan smallest;                // the smallest-memory plan seen (for "nothing fits" messages)
  SearchStats stats, sp_stats;
  // The fastest fitting plan without ([0]) and with ([1]) sequence parallelism; label empty when none.
  std::array<EvaluatedPlan, 2> best_by_sp;
  // With TuneOptions::min_gain_pct: why a named strategy heads `top` instead of the search's best ("" else).
  std::string kept_strategy_note;
  long full_simulations = 0;
  double seconds = 0;
  const EvaluatedPlan* baseline(const std::string& name) const;
};

struct TuneResult {
  std::string profile;  // name of the profile the costs came from
  std::vector<TpTuning> per_tp;
  // Index into per_tp of the best fitting plan: within a TP degree the fastest iteration, across degrees the
  // most tokens per second per GPU (a larger group may finish sooner yet train fewer tokens per GPU).
  int best_tp = -1;
  double seconds = 0;
  const TpTuning& best_tuning() const { return per_tp.at(best_tp); }
  const EvaluatedPlan& best() const { return best_tuning().top.front(); }
};

// Tunes one TP degree. top is empty when nothing fits the memory limit.
TpTuning tune_tp(const ModelSpec& model, const CostModel& cost, const TuneOptions& options, Progress* progress = nullptr);

// Tunes every TP degree in tps (empty: the model's own) under the model's training context
// (model.training: dp, ZeRO). BadInput when no plan of any degree fits the memory limit ("no plan fits
// 80 GiB: the smallest needs 93.2 GiB (tp 8, ...)").
TuneResult tune(const ModelSpec& model, const std::vector<int>& tps, const CostModel& cost, const TuneOptions& options);

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace domino
