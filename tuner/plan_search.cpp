// plan_search.cpp: screening, K-best DP over the block chain, swap checks; see plan_search.hpp.
#include "tuner/plan_search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "sim/base/error.hpp"
#include "tuner/chain_dp.hpp"
#include "tuner/progress.hpp"

namespace domino {
namespace {

int type_at(int pos) { return pos % 2; }  // 0 attn, 1 mlp

class Searcher {
 public:
  Searcher(const ModelSpec& model, const SearchSpace& space, SegmentCosts& costs, double reference_us)
      : space_(space), costs_(costs), n_(2 * model.layers), reference_us_(reference_us) {}

  std::vector<int> keep[2];  // kept choice indices per type, ascending (= tie-break order)

  void keep_all() {
    for (int t = 0; t < 2; ++t) {
      keep[t].clear();
      for (int c = 0; c < list_size(t); ++c) keep[t].push_back(c);
    }
  }

  // Keeps, per (split dim, p, overlap, order) group, the choices with the lowest weighted per-block cost, plus
  // the pinned (baseline) choices and the reference.
  void screen(int per_group, int ref_attn, int ref_mlp) {
    std::vector<double> weight(2 * costs_.probe_layers(), 0.0);
    for (int i = 0; i < n_; ++i) weight[costs_.probe_position(i)] += 1;
    for (int t = 0; t < 2; ++t) {
      const auto& list = t == 0 ? space_.attn : space_.mlp;
      std::set<int> kept = {t == 0 ? ref_attn : ref_mlp};
      for (const LayerPlan& l : space_.pinned) {
        const BlockPlan& b = t == 0 ? l.attn : l.mlp;
        kept.insert(int(std::find(list.begin(), list.end(), b) - list.begin()));
      }
      // Group key (dim, p, overlap, order): what decides whether neighbours' slices line up and overlap
      // (the order decides what a held-back add runs behind); the per-block score ranks q and backward
      // overlap inside a group.
      using GroupKey = std::tuple<int, int, int, int>;  // dim, p, overlap, order
      std::vector<std::tuple<GroupKey, double, int>> scored;  // group, score, index
      const auto& other = t == 0 ? space_.mlp : space_.attn;
      for (int c = 0; c < int(list.size()); ++c) {
        double score = 0;
        for (int k = t; k < int(weight.size()); k += 2) score += weight[k] * costs_.unary(k, c);
        // Next to a neighbour with the same choice (a uniform plan): what the inter-block overlap gains
        // with a neighbour whose slices line up, which the reference neighbours never show.
        const int mirror = int(std::find(other.begin(), other.end(), list[c]) - other.begin());
        if (mirror < int(other.size())) {
          if (t == 0) score += (n_ / 2) * costs_.pair(0, c, mirror);
          else if (costs_.probe_layers() > 1) score += (n_ / 2 - 1) * costs_.pair(1, c, mirror);
          else score += costs_.pair(0, mirror, c);
        }
        const BlockPlan& b = list[c];
        scored.emplace_back(GroupKey{int(b.dim), b.p, int(b.overlap), int(b.order)}, score, c);
      }
      std::sort(scored.begin(), scored.end());
      int run = 0;
      for (size_t j = 0; j < scored.size(); ++j) {
        const bool same = j > 0 && std::get<0>(scored[j]) == std::get<0>(scored[j - 1]);
        run = same ? run + 1 : 0;
        if (run < per_group) kept.insert(std::get<2>(scored[j]));
      }
      kept.erase(int(list.size()));  // a pinned choice missing from the list (cannot happen) is ignored
      keep[t].assign(kept.begin(), kept.end());
    }
  }

  // K best paths under the time expansion, picks as space indices.
  std::vector<ChainPath> solve(int k) {
    const int blocks = 2 * costs_.probe_layers();
    std::vector<std::vector<double>> unary(blocks);
    for (int p = 0; p < blocks; ++p)
      for (int c : keep[type_at(p)]) unary[p].push_back(costs_.unary(p, c));
    std::vector<std::vector<double>> pair(std::min(blocks - 1, 2));
    for (int p = 0; p < int(pair.size()); ++p)
      for (int a : keep[type_at(p)])
        for (int b : keep[type_at(p + 1)]) pair[p].push_back(costs_.pair(p, a, b));
    std::vector<ChainStage> stages(n_);
    for (int i = 0; i < n_; ++i) {
      stages[i].size = int(keep[type_at(i)].size());
      stages[i].unary = unary[costs_.probe_position(i)].data();
      if (i > 0) stages[i].pair_in = pair[pair_probe(i - 1)].data();
    }
    std::vector<ChainPath> paths = k_best_paths(stages, reference_us_, k);
    for (ChainPath& path : paths)
      for (int i = 0; i < n_; ++i) path.pick[i] = keep[type_at(i)][path.pick[i]];
    return paths;
  }

  // The best plans whose blocks all have the buffer shapes (split dim, p, q) of `shape`: peak memory is
  // the sum of the distinct buffers, so plans that mix shapes need more than single-shape ones.
  std::vector<ChainPath> solve_single_shape(const LayerPlan& shape, int k) {
    const std::vector<int> saved[2] = {keep[0], keep[1]};
    for (int t = 0; t < 2; ++t) {
      const auto& list = t == 0 ? space_.attn : space_.mlp;
      const BlockPlan& want = t == 0 ? shape.attn : shape.mlp;
      keep[t].clear();
      for (int c = 0; c < int(list.size()); ++c)
        if (list[c].dim == want.dim && list[c].p == want.p && list[c].q == want.q) keep[t].push_back(c);
    }
    std::vector<ChainPath> paths = solve(k);
    keep[0] = saved[0];
    keep[1] = saved[1];
    return paths;
  }

  // Adds every screened-out choice that would make `best` cheaper when put in one block position.
  // Returns how many were added.
  int add_improving(const std::vector<int>& best) {
    const double tol = 1e-9 * std::max(1.0, std::abs(reference_us_));
    int added = 0;
    for (int t = 0; t < 2; ++t) {
      // Distinct contexts of this type's positions: (probe position, left, own, right); -1 = no neighbour.
      std::set<std::tuple<int, int, int, int, int>> contexts;
      for (int i = t; i < n_; i += 2)
        contexts.emplace(costs_.probe_position(i), i > 0 ? best[i - 1] : -1, best[i], i + 1 < n_ ? best[i + 1] : -1,
                         i);
      std::set<std::tuple<int, int, int, int>> seen;
      std::vector<int> improving;
      for (int c = 0; c < list_size(t); ++c) {
        if (std::binary_search(keep[t].begin(), keep[t].end(), c)) continue;
        seen.clear();
        for (const auto& [pp, left, own, right, i] : contexts) {
          if (!seen.emplace(pp, left, own, right).second) continue;
          double delta = costs_.unary(pp, c) - costs_.unary(pp, own);
          if (left >= 0) delta += costs_.pair(pair_probe(i - 1), left, c) - costs_.pair(pair_probe(i - 1), left, own);
          if (right >= 0) delta += costs_.pair(pair_probe(i), c, right) - costs_.pair(pair_probe(i), own, right);
          if (delta < -tol) {
            improving.push_back(c);
            break;
          }
        }
      }
      for (int c : improving) keep[t].insert(std::lower_bound(keep[t].begin(), keep[t].end(), c), c);
      added += int(improving.size());
    }
    return added;
  }

 private:
  int list_size(int t) const { return int(t == 0 ? space_.attn.size() : space_.mlp.size()); }
  // Probe pair standing for the real pair (i, i+1): attn->mlp pairs use probe blocks (0,1), mlp->attn (1,2).
  int pair_probe(int i) const { return type_at(i) == 0 ? 0 : 1; }

  const SearchSpace& space_;
  SegmentCosts& costs_;
  int n_;
  double reference_us_;
};

Candidate to_candidate(const SearchSpace& space, const ChainPath& path) {
  Candidate c;
  c.predicted_us = path.cost;
  for (size_t i = 0; i + 1 < path.pick.size(); i += 2)
    c.layers.push_back(LayerPlan{space.attn[path.pick[i]], space.mlp[path.pick[i + 1]]});
  return c;
}

}  // namespace

std::string describe_search_mode(const SearchStats& stats) {
  if (!stats.screened) return " (full search: every pair of choices)";
  return fmt::format(
      " (screened search: the full one needs {} probes, over its budget {}; screened to {} x {} "
      "choices, {} swap rounds)",
      stats.full_search_probes, stats.full_search_probe_limit, stats.attn_kept, stats.mlp_kept,
      stats.swap_rounds);
}

PlanSearch search_plans(const ModelSpec& model, const CostModel& cost, const SearchSpace& space, int ref_attn,
                        int ref_mlp, double reference_us, const SearchTuning& tuning, Progress* progress) {
  if (tuning.shortlist < 1) throw_bad_input("plan search: the shortlist needs at least one plan");
  SegmentCosts costs(model, cost, space, ref_attn, ref_mlp, progress);
  Searcher searcher(model, space, costs, reference_us);
  PlanSearch out;
  out.stats.full_search_probes = costs.full_table_simulations();
  out.stats.full_search_probe_limit = tuning.full_search_probe_limit;
  if (out.stats.full_search_probes <= tuning.full_search_probe_limit) {
    costs.set_expected(out.stats.full_search_probes);
    costs.set_batched(tuning.probe_classes);
    searcher.keep_all();
  } else {
    out.stats.screened = true;
    searcher.screen(tuning.keep_per_group, ref_attn, ref_mlp);
    costs.set_expected(long(searcher.keep[0].size() * searcher.keep[1].size()) * 2 +
                       long(space.attn.size() + space.mlp.size()) * 6);
  }
  std::vector<ChainPath> paths = searcher.solve(tuning.shortlist);
  if (paths.empty()) throw_runtime(fmt::format("plan search for {}: every plan has an infinite cost", model.name));
  if (out.stats.screened) {
    // A screened-out choice could only matter through its neighbours: check each one in the best plan's
    // actual contexts, re-run the DP with any that helps, until none does.
    while (out.stats.swap_rounds < tuning.max_swap_rounds && searcher.add_improving(paths.front().pick) > 0) {
      ++out.stats.swap_rounds;
      paths = searcher.solve(tuning.shortlist);
    }
  }
  for (const ChainPath& p : paths) out.shortlist.push_back(to_candidate(space, p));
  if (tuning.memory_frontier) {
    // Under a memory limit the fastest plans may mix buffer shapes (more memory): offer, for the shapes
    // the best plans mostly use, the best single-shape plans too.
    std::vector<LayerPlan> shapes;
    for (const Candidate& c : out.shortlist) {
      std::map<LayerPlan, int> count;
      for (const LayerPlan& l : c.layers) ++count[l];
      const LayerPlan common = std::max_element(count.begin(), count.end(), [](const auto& a, const auto& b) {
                                 return a.second < b.second;
                               })->first;
      if (std::find(shapes.begin(), shapes.end(), common) == shapes.end()) shapes.push_back(common);
    }
    for (const LayerPlan& shape : shapes)
      for (const ChainPath& p : searcher.solve_single_shape(shape, 2)) out.memory_frontier.push_back(to_candidate(space, p));
  }
  out.stats.probe_simulations = costs.simulations();
  out.stats.attn_kept = int(searcher.keep[0].size());
  out.stats.mlp_kept = int(searcher.keep[1].size());
  return out;
}

}  // namespace domino
