// segment_costs.cpp: simulates probe plans (cached) and turns them into the per-block and pair terms.
#include "tuner/segment_costs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "sim/base/error.hpp"
#include "tuner/probe_variants.hpp"
#include "tuner/progress.hpp"

namespace domino {
namespace {
Block block_at(int pos) { return pos % 2 == 0 ? Block::Attn : Block::Mlp; }
SimOptions figures_only() {
  SimOptions options;
  options.record_timeline = false;
  return options;
}
// The schedules here are only timed: their buffers need no readable names.
BuildOptions unnamed_buffers() {
  BuildOptions options;
  options.buffer_names = false;
  return options;
}
SimFigures figures_of(const SimResult& r) {
  SimFigures f;
  f.iteration_us = r.iteration_us;
  f.compute_us = r.compute_us;
  f.comm_us = r.comm_us;
  f.exposed_comm_us = r.exposed_comm_us;
  f.peak_memory_bytes = r.peak_memory_bytes;
  return f;
}
}  // namespace

bool blocks_cannot_overlap(const ModelSpec& model, const BlockPlan& left, const BlockPlan& right) {
  if (model.residual != Residual::Sequential) return false;
  // DeepSpeed's early norm needs both blocks in its order and slices of the same rows (same dim and count).
  if (left.order == SliceOrder::DeepSpeed && right.order == SliceOrder::DeepSpeed && left.dim == right.dim &&
      left.p == right.p)
    return false;
  // The held-back add and norm backward need a slice of one block sharing no rows with the other's first.
  if (left.p == 1 || right.p == 1 || left.dim != right.dim) return true;
  return left.overlap != OverlapMode::Inter && right.overlap != OverlapMode::Inter;
}

SimFigures simulate_schedule(const Schedule& schedule, const CostModel& cost) {
  return simulate_schedule(schedule, op_costs(schedule, cost, figures_only()));
}

SimFigures simulate_schedule(const Schedule& schedule, const OpCosts& costs) {
  return figures_of(simulate(schedule, costs, figures_only()));
}

SimFigures simulate_plan(const ModelSpec& model, const Plan& plan, const CostModel& cost) {
  return simulate_schedule(build_schedule(model, plan, unnamed_buffers()), cost);
}

Plan plan_from_blocks(const ModelSpec& model, const std::vector<LayerPlan>& layers, const std::string& strategy,
                      bool sequence_parallel) {
  if (layers.empty() || int(layers.size()) != model.layers)
    throw_runtime(fmt::format("plan_from_blocks: {} layer plans for a {}-layer model", layers.size(), model.layers));
  Plan plan = make_uniform_plan(model, layers[0].attn, layers[0].mlp, strategy);
  plan.layers = layers;
  plan.sequence_parallel = sequence_parallel;
  return plan;
}

SegmentCosts::SegmentCosts(const ModelSpec& model, const CostModel& cost, const SearchSpace& space, int ref_attn,
                           int ref_mlp, Progress* progress)
    : probe_(model), model_layers_(model.layers), cost_(cost), op_cost_cache_(cost, model.tp), space_(space), ref_attn_(ref_attn),
      ref_mlp_(ref_mlp), progress_(progress) {
  if (model.layers < 1) throw_bad_input(fmt::format("model {} has no layers to tune", model.name));
  // Two layers hold every kind of block position (first attn, interior attn and mlp, last mlp) and
  // both kinds of neighbour pair (attn->mlp, mlp->next attn).
  probe_.layers = std::min(model.layers, 2);
  const int blocks = 2 * probe_.layers;
  unary_.resize(blocks);
  for (int k = 0; k < blocks; ++k) unary_[k].resize(space.of(block_at(k)).size());
  pair_.resize(blocks - 1);
  for (int k = 0; k + 1 < blocks; ++k) pair_[k].resize(space.of(block_at(k)).size() * space.of(block_at(k + 1)).size());
  for (int t = 0; t < 2; ++t) {
    std::map<BlockPlan, int> classes;
    for (const BlockPlan& b : t == 0 ? space.attn : space.mlp) {
      const int c = classes.emplace(policy_free(b), int(classes.size())).first->second;
      class_of_[t].push_back(c);
      if (c == int(members_[t].size())) members_[t].emplace_back();
      members_[t][size_t(c)].push_back(int(class_of_[t].size()) - 1);
    }
  }
  base_ = run(0, ref_attn_, -1);
}

int SegmentCosts::probe_position(int i) const {
  const int n = positions();
  if (probe_.layers == 1) return i;
  if (i == 0) return 0;
  if (i == n - 1) return 3;
  return i % 2 == 0 ? 2 : 1;
}

size_t SegmentCosts::pair_index(int k, int left, int right) const {
  return size_t(left) * space_.of(block_at(k + 1)).size() + size_t(right);
}

bool SegmentCosts::is_ref(int k, int c) const { return c == (block_at(k) == Block::Attn ? ref_attn_ : ref_mlp_); }

SegmentCosts::Cell& SegmentCosts::cell(int k, int choice, int right_choice) {
  return right_choice < 0 ? unary_[k][choice] : pair_[k][pair_index(k, choice, right_choice)];
}

std::vector<LayerPlan> SegmentCosts::probe_layers(int k, int choice, int right_choice) const {
  std::vector<LayerPlan> layers(probe_.layers, LayerPlan{space_.attn[ref_attn_], space_.mlp[ref_mlp_]});
  auto set = [&](int pos, int c) {
    LayerPlan& l = layers[pos / 2];
    (pos % 2 == 0 ? l.attn : l.mlp) = space_.of(block_at(pos))[c];
  };
  set(k, choice);
  if (right_choice >= 0) set(k + 1, right_choice);
  return layers;
}

void SegmentCosts::count_simulation() {
  ++simulations_;
  if (progress_) progress_->tick(simulations_, expected_);
}

const SimFigures& SegmentCosts::run(int k, int choice, int right_choice) {
  // A block at its reference choice changes nothing: reuse the smaller simulation.
  if (simulations_ > 0) {
    if (right_choice >= 0 && is_ref(k + 1, right_choice)) return run(k, choice, -1);
    if (right_choice >= 0 && is_ref(k, choice)) return run(k + 1, right_choice, -1);
    if (right_choice < 0 && is_ref(k, choice)) return base_;
  }
  Cell& c = cell(k, choice, right_choice);
  if (c.done) return c.fig;
  if (batched_) {
    run_class(k, choice, right_choice);
    return c.fig;
  }
  // One build per probe (schedules the class rules do not cover, e.g. sequence parallelism's collectives),
  // its op costs still shared with every earlier probe through the cache.
  const Schedule built = build_schedule(
      probe_, plan_from_blocks(probe_, probe_layers(k, choice, right_choice), "probe", space_.sequence_parallel),
      unnamed_buffers());
  c.fig = simulate_schedule(built, op_cost_cache_.op_costs(built, figures_only()));
  c.done = true;
  count_simulation();
  return c.fig;
}

// The members the full search asks for: not at the reference (the base and the unary probes stand for
// those), and pairs only where their blocks can overlap (the others' terms are zero). Whether a pair can
// overlap depends on inter-block overlap, slices and order only, alike for a whole class.
void SegmentCosts::run_class(int k, int choice, int right_choice) {
  const bool pair = right_choice >= 0;
  const int tl = block_at(k) == Block::Attn ? 0 : 1;
  const std::vector<int> none = {-1};
  const std::vector<int>& lefts = members_[tl][size_t(class_of_[tl][size_t(choice)])];
  const std::vector<int>& rights = pair ? members_[1 - tl][size_t(class_of_[1 - tl][size_t(right_choice)])] : none;
  std::vector<LayerPlan> rep = probe_layers(k, choice, right_choice);
  auto& first = k % 2 == 0 ? rep[size_t(k / 2)].attn : rep[size_t(k / 2)].mlp;
  first = policy_free(first);
  std::vector<std::pair<int, Block>> varying = {{k / 2, block_at(k)}};
  if (pair) {
    auto& second = (k + 1) % 2 == 0 ? rep[size_t((k + 1) / 2)].attn : rep[size_t((k + 1) / 2)].mlp;
    second = policy_free(second);
    varying.emplace_back((k + 1) / 2, block_at(k + 1));
  }
  // Every member has the representative's ops, so their durations and interference rates too.
  Schedule built = build_schedule(probe_, plan_from_blocks(probe_, rep, "probe", space_.sequence_parallel),
                                  unnamed_buffers());
  if (!ProbeVariants::supported(built)) {
    batched_ = false;  // a schedule the class rules do not cover: one build per probe from here on
    run(k, choice, right_choice);
    return;
  }
  const OpCosts costs = op_cost_cache_.op_costs(built, figures_only());
  // Members differ from the representative in dependencies only; the buffers, hence the memory, are its own.
  const int64_t memory = schedule_memory_bytes(built);
  SimOptions timing_only = figures_only();
  timing_only.memory = false;
  ProbeVariants variants(std::move(built), varying);
  // Without arrival skew (which reads the schedule's deps) a member is the representative's program with
  // its policy deps added, the streams' orders and waits worked out once per class.
  const bool by_program = !costs.skew_reads_deps();
  if (by_program) program_.load(variants.built());
  for (int a : lefts) {
    for (int b : rights) {
      const bool asked = a == choice && b == right_choice;
      if (!asked && (is_ref(k, a) || (pair && (is_ref(k + 1, b) || independent_pair(k, a, b))))) continue;
      Cell& c = cell(k, a, b);
      if (c.done) continue;
      const std::vector<LayerPlan> layers = probe_layers(k, a, b);
      if (by_program) {
        program_.reset();
        variants.for_each_policy_dep(layers, [this](int32_t op, int32_t dep) { program_.add_dep(op, dep); });
        c.fig = figures_of(simulate(program_, costs, timing_only));
      } else {
        c.fig = figures_of(simulate(variants.with_layers(layers), costs, timing_only));
      }
      c.fig.peak_memory_bytes = memory;
      c.done = true;
      count_simulation();
    }
  }
}

long SegmentCosts::full_table_simulations() const {
  const int blocks = 2 * probe_.layers;
  auto others = [&](int k) { return long(space_.of(block_at(k)).size()) - 1; };  // the reference is the base
  long n = 1;
  for (int k = 0; k < blocks; ++k) n += others(k);
  for (int k = 0; k < std::min(blocks - 1, 2); ++k) {
    const int ref_left = block_at(k) == Block::Attn ? ref_attn_ : ref_mlp_;
    const int ref_right = block_at(k + 1) == Block::Attn ? ref_attn_ : ref_mlp_;
    const auto& left = space_.of(block_at(k));
    const auto& right = space_.of(block_at(k + 1));
    for (int a = 0; a < int(left.size()); ++a)
      for (int b = 0; b < int(right.size()); ++b)
        n += a != ref_left && b != ref_right && !independent_pair(k, a, b);
  }
  return n;
}

// The four probes of the pair term each split between blocks k and k+1 (so that the term cancels
// exactly) only when the reference choices cannot overlap with each other or with the pair's choices.
bool SegmentCosts::independent_pair(int k, int left, int right) const {
  // The rule below is proven for the AllReduce schedules only: under sequence parallelism every pair is probed.
  if (space_.sequence_parallel) return false;
  const BlockPlan& a = space_.of(block_at(k))[left];
  const BlockPlan& b = space_.of(block_at(k + 1))[right];
  const BlockPlan& ref_a = space_.of(block_at(k))[block_at(k) == Block::Attn ? ref_attn_ : ref_mlp_];
  const BlockPlan& ref_b = space_.of(block_at(k + 1))[block_at(k + 1) == Block::Attn ? ref_attn_ : ref_mlp_];
  return blocks_cannot_overlap(probe_, a, b) && blocks_cannot_overlap(probe_, a, ref_b) &&
         blocks_cannot_overlap(probe_, ref_a, b) && blocks_cannot_overlap(probe_, ref_a, ref_b);
}

double SegmentCosts::unary(int k, int choice) { return run(k, choice, -1).iteration_us - base_.iteration_us; }

double SegmentCosts::pair(int k, int left, int right) {
  if (independent_pair(k, left, right)) return 0;
  const double both = run(k, left, right).iteration_us;
  return both - base_.iteration_us - unary(k, left) - unary(k + 1, right);
}

}  // namespace domino
