// segment_costs.hpp: the iteration time of a uniform model written as a sum over its block chain
// (attn_1, mlp_1, attn_2, ...) of per-block and neighbouring-pair terms, measured by simulating a short
// probe model with the same layer shapes. Every simulation is cached, so identical layers and identical
// sub-plans are simulated once.
//
// Decomposition (Moebius expansion around a reference choice r, e.g. megatron-sync's blocks):
//   T(x) = T(r) + sum_i U_c(i)(x_i) + sum_i P_c(i)(x_i, x_i+1)
//   U_k(a)    = T_probe(r with probe block k = a) - T_probe(r)
//   P_k(a, b) = T_probe(r with k = a, k+1 = b) - T_probe(r) - U_k(a) - U_k+1(b)
// It is exact when blocks interact only with their neighbours (each block's waits resynchronise the
// streams, the inter-block overlap reaching one block forward / backward) and interior layers behave
// alike. The tuner checks it: the DP's best plans are re-simulated in full, and the brute-force test
// compares the result with exhaustive enumeration.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "sim/cost/cost_model.hpp"
#include "sim/model/plan.hpp"
#include "sim/engine/op_cost_cache.hpp"
#include "sim/engine/sim_program.hpp"
#include "sim/engine/simulator.hpp"
#include "tuner/search_space.hpp"

namespace domino {

class Progress;

// What the tuner keeps of one simulation.
struct SimFigures {
  double iteration_us = 0;
  double compute_us = 0;
  double comm_us = 0;
  double exposed_comm_us = 0;
  int64_t peak_memory_bytes = 0;
};

// Whether two neighbouring blocks (left before right in forward order) can never overlap, so that their
// pair term is zero without a probe. Each block's last compute op waits for its own last AllReduce, in
// forward (the residual add) and in backward (the norm backward), and the compute stream runs in program
// order, so the iteration splits between the two blocks unless one of the schedule's links between blocks
// moves an op across the boundary: the left block's held-back residual add or the right block's held-back
// norm backward (inter-block overlap on that block, with slices that share no rows with the other block's
// first one), or DeepSpeed's early norm (both blocks in that order, slices of the same rows). With a single
// slice on either side, or splits along different dimensions, no slice of one shares no rows with the
// other's first. Never with parallel residual blocks, whose MLP reads the layer's input, not the
// attention's output.
bool blocks_cannot_overlap(const ModelSpec& model, const BlockPlan& left, const BlockPlan& right);

// simulate(build_schedule(model, plan), cost) without a timeline: the ground truth for every figure.
SimFigures simulate_plan(const ModelSpec& model, const Plan& plan, const CostModel& cost);
SimFigures simulate_schedule(const Schedule& schedule, const CostModel& cost);
SimFigures simulate_schedule(const Schedule& schedule, const OpCosts& costs);  // the op costs of that schedule

// A plan for `model` with the given block choices per layer (attn[l], mlp[l]).
Plan plan_from_blocks(const ModelSpec& model, const std::vector<LayerPlan>& layers, const std::string& strategy,
                      bool sequence_parallel = false);

class SegmentCosts {
 public:
  // ref_attn / ref_mlp: indices into space.attn / space.mlp of the reference choice r.
  SegmentCosts(const ModelSpec& model, const CostModel& cost, const SearchSpace& space, int ref_attn,
               int ref_mlp, Progress* progress = nullptr);

  int probe_layers() const { return probe_.layers; }
  int positions() const { return 2 * model_layers_; }  // blocks of the real model
  // Probe block standing for real block position i (0 = attn of layer 0, 1 = its mlp, ...).
  int probe_position(int i) const;

  // Terms of the decomposition (simulated on first use, then cached); choice indices into the space
  // list of the block type at that position. pair(k, a, b) couples probe blocks k and k+1; it is zero,
  // with no probe, when neither the pair nor either of them with the reference's choices can overlap
  // (blocks_cannot_overlap).
  double unary(int probe_pos, int choice);
  double pair(int probe_pos, int left_choice, int right_choice);
  // T(r) of the probe (the constant of the probe expansion).
  double probe_base_us() const { return base_.iteration_us; }
  long simulations() const { return simulations_; }
  // Distinct probe simulations of every term the chain uses (each position's unary terms, the attn->mlp
  // and mlp->attn pair tables), the reference's own rows and columns reused and the pairs of blocks that
  // cannot overlap skipped: what the full search costs.
  long full_table_simulations() const;
  void set_expected(long n) { expected_ = n; }  // for the progress line only
  // Whether a probe also simulates every other probe of its class that the full search needs (choices
  // that differ only in their policy, probe_variants.hpp), from one built schedule: what the full search
  // wants, since it asks for every term; the screened search asks for few of them.
  void set_batched(bool batched) { batched_ = batched; }

 private:
  struct Cell {
    bool done = false;
    SimFigures fig;
  };
  const SimFigures& run(int probe_pos, int choice, int right_choice);  // right_choice -1: unary only
  // The probe of choice (and right_choice) with the rest of the probe at the reference.
  std::vector<LayerPlan> probe_layers(int probe_pos, int choice, int right_choice) const;
  // Simulates, from one build, every probe the full search needs among the class members of the choices.
  void run_class(int probe_pos, int choice, int right_choice);
  Cell& cell(int probe_pos, int choice, int right_choice);
  bool is_ref(int probe_pos, int choice) const;
  void count_simulation();
  size_t pair_index(int probe_pos, int left, int right) const;
  bool independent_pair(int probe_pos, int left, int right) const;  // the pair term is zero, no probe needed

  ModelSpec probe_;
  int model_layers_ = 0;
  const CostModel& cost_;
  OpCostCache op_cost_cache_;  // the probe builds' op costs, shared by every class build
  SimProgram program_;         // the class being simulated (its memory kept from one class to the next)
  const SearchSpace& space_;
  int ref_attn_, ref_mlp_;
  Progress* progress_;
  SimFigures base_;
  std::vector<std::vector<Cell>> unary_;  // [probe_pos][choice]
  std::vector<std::vector<Cell>> pair_;   // [probe_pos][left * n_right + right]
  long simulations_ = 0;
  long expected_ = 0;
  bool batched_ = false;
  std::vector<int> class_of_[2];                 // per type (attn, mlp) and choice: its policy class
  std::vector<std::vector<int>> members_[2];     // per type and class: its choices, ascending
};

}  // namespace domino
