// plan_search.hpp: the exact search for one model at one TP degree: per-block and pair costs from the
// probe (segment_costs), K-best dynamic programming over the block chain (chain_dp), and, for large
// spaces, screening of the choices followed by a swap check against every screened-out choice.
#pragma once

#include <vector>

#include "tuner/segment_costs.hpp"

namespace domino {

struct SearchTuning {
  int shortlist = 8;              // best DP plans handed back (re-simulated in full by the caller)
  long exact_pair_limit = 1600;   // |attn| * |mlp| up to which every pair is simulated (no screening)
  int keep_per_group = 1;         // screening: best choices kept per (split dim, p, overlap) group
  int max_swap_rounds = 8;        // screening: rounds of "could any screened-out choice improve it?"
  bool memory_frontier = false;   // also return single-buffer-shape plans (under a memory limit)
};

struct Candidate {
  std::vector<LayerPlan> layers;
  double predicted_us = 0;  // the decomposition's figure (the full simulation is the truth)
};

struct SearchStats {
  long probe_simulations = 0;
  bool screened = false;
  int attn_kept = 0, mlp_kept = 0;  // choices the DP ran over, after screening and swap checks
  int swap_rounds = 0;
};

struct PlanSearch {
  std::vector<Candidate> shortlist;  // best predicted first
  std::vector<Candidate> memory_frontier;  // with SearchTuning::memory_frontier: leaner alternatives
  SearchStats stats;
};

// ref_attn/ref_mlp: the reference choice (indices into the space), reference_us: the full simulation of
// the model with every block at the reference (the constant of the decomposition).
PlanSearch search_plans(const ModelSpec& model, const CostModel& cost, const SearchSpace& space, int ref_attn,
                        int ref_mlp, double reference_us, const SearchTuning& tuning, Progress* progress = nullptr);

}  // namespace domino
