// plan_search.hpp: the exact search for one model at one TP degree: per-block and pair costs from the
// probe (segment_costs), K-best dynamic programming over the block chain (chain_dp). The full search
// simulates every pair of choices; when that needs more probe simulations than its budget, the screened
// search runs instead: screening of the choices, then a swap check against every screened-out choice.
#pragma once

#include <string>
#include <vector>

#include "tuner/segment_costs.hpp"

namespace domino {

struct SearchTuning {
  int shortlist = 8;              // best DP plans handed back (re-simulated in full by the caller)
  // Probe simulations the full search (every pair of choices, no screening) may take; beyond it the
  // screened search runs. 30000 is about 0.4 s on one core: with one schedule build per class of choices
  // (probe_classes) a probe costs about 13 us, so the full search of Llama-2 70B at TP 8 (196 x 196
  // choices, 20941 probes) takes about 0.27 s, GPT-3 13B's (232 x 232, 28573 probes) about 0.4 s
  // (tests/bench/tune_bench.cpp; assumption: other models' probes cost about as much). Probes built one
  // by one (sequence parallelism) cost several times more.
  long full_search_probe_limit = 30000;
  int keep_per_group = 1;         // screening: best choices kept per (split dim, p, overlap) group
  int max_swap_rounds = 8;        // screening: rounds of "could any screened-out choice improve it?"
  bool memory_frontier = false;   // also return single-buffer-shape plans (under a memory limit)
  // Full search: one schedule build per class of choices that differ only in their AllReduce waits
  // (probe_variants.hpp); false builds every probe (the same figures, for checks and benchmarks).
  bool probe_classes = true;
};

struct Candidate {
  std::vector<LayerPlan> layers;
  double predicted_us = 0;  // the decomposition's figure (the full simulation is the truth)
};

struct SearchStats {
  long probe_simulations = 0;
  bool screened = false;             // the screened search ran (the full one was over its budget)
  long full_search_probes = 0;       // probe simulations the full search needs
  long full_search_probe_limit = 0;  // its budget (SearchTuning::full_search_probe_limit)
  int attn_kept = 0, mlp_kept = 0;  // choices the DP ran over, after screening and swap checks
  int swap_rounds = 0;
};

struct PlanSearch {
  std::vector<Candidate> shortlist;  // best predicted first
  std::vector<Candidate> memory_frontier;  // with SearchTuning::memory_frontier: leaner alternatives
  SearchStats stats;
};

// " (full search: every pair of choices)" or " (screened search: the full one needs N probes, over its
// budget M; screened to A x B choices, S swap rounds)": which search ran, for the report.
std::string describe_search_mode(const SearchStats& stats);

// ref_attn/ref_mlp: the reference choice (indices into the space), reference_us: the full simulation of
// the model with every block at the reference (the constant of the decomposition).
PlanSearch search_plans(const ModelSpec& model, const CostModel& cost, const SearchSpace& space, int ref_attn,
                        int ref_mlp, double reference_us, const SearchTuning& tuning, Progress* progress = nullptr);

}  // namespace domino
