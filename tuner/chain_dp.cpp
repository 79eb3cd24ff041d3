// chain_dp.cpp: K-best Viterbi. Each (stage, option) keeps its k cheapest partial paths; a partial path
// is extended only through the k best of its predecessor, which is exact for the k best full paths. Per
// (stage, option) the work is one pass over the predecessors plus k x k candidates, not predecessors x k.
#include "tuner/chain_dp.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "sim/base/error.hpp"

namespace domino {
namespace {

struct Entry {
  double cost;
  int prev_option;  // -1 at stage 0
  int prev_rank;
};

bool entry_less(const Entry& a, const Entry& b) {
  return std::tie(a.cost, a.prev_option, a.prev_rank) < std::tie(b.cost, b.prev_option, b.prev_rank);
}

}  // namespace

std::vector<ChainPath> k_best_paths(const std::vector<ChainStage>& stages, double base, int k) {
  if (k < 1 || stages.empty()) return {};
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i].size < 1 || !stages[i].unary || (i > 0 && !stages[i].pair_in))
      throw_runtime("chain DP: malformed stage " + std::to_string(i));
  }
  // best[i][option] = up to k entries, sorted.
  std::vector<std::vector<std::vector<Entry>>> best(stages.size());
  best[0].resize(stages[0].size);
  for (int c = 0; c < stages[0].size; ++c) {
    const double u = stages[0].unary[c];
    if (std::isfinite(u)) best[0][c].push_back({base + u, -1, 0});
  }
  std::vector<Entry> heads, pool;
  for (size_t i = 1; i < stages.size(); ++i) {
    const ChainStage& st = stages[i];
    const int prev_size = stages[i - 1].size;
    best[i].resize(st.size);
    for (int c = 0; c < st.size; ++c) {
      const double u = st.unary[c];
      if (!std::isfinite(u)) continue;
      // Each predecessor's list is sorted, so its entries extended by (w + u) stay sorted under (cost,
      // option, rank): the k best extensions come from the predecessors with the k best first entries.
      heads.clear();
      for (int p = 0; p < prev_size; ++p) {
        const double w = st.pair_in[size_t(p) * st.size + c];
        if (!std::isfinite(w) || best[i - 1][p].empty()) continue;
        heads.push_back({best[i - 1][p].front().cost + w + u, p, 0});
      }
      const size_t lists = std::min(heads.size(), size_t(k));
      std::partial_sort(heads.begin(), heads.begin() + lists, heads.end(), entry_less);
      pool.clear();
      for (size_t h = 0; h < lists; ++h) {
        const int p = heads[h].prev_option;
        const double w = st.pair_in[size_t(p) * st.size + c];
        const auto& from = best[i - 1][p];
        for (int r = 0; r < int(from.size()); ++r) pool.push_back({from[r].cost + w + u, p, r});
      }
      const size_t keep = std::min(pool.size(), size_t(k));
      std::partial_sort(pool.begin(), pool.begin() + keep, pool.end(), entry_less);
      best[i][c].assign(pool.begin(), pool.begin() + keep);
    }
  }
  // Gather the final stage's entries and walk back.
  struct Final {
    double cost;
    int option, rank;
  };
  std::vector<Final> finals;
  const auto& last = best.back();
  for (int c = 0; c < int(last.size()); ++c)
    for (int r = 0; r < int(last[c].size()); ++r) finals.push_back({last[c][r].cost, c, r});
  std::sort(finals.begin(), finals.end(), [](const Final& a, const Final& b) {
    return std::tie(a.cost, a.option, a.rank) < std::tie(b.cost, b.option, b.rank);
  });
  if (finals.size() > size_t(k)) finals.resize(k);
  std::vector<ChainPath> out;
  for (const Final& f : finals) {
    ChainPath path;
    path.cost = f.cost;
    path.pick.assign(stages.size(), 0);
    int option = f.option, rank = f.rank;
    for (size_t i = stages.size(); i-- > 0;) {
      path.pick[i] = option;
      const Entry& e = best[i][option][rank];
      option = e.prev_option;
      rank = e.prev_rank;
    }
    out.push_back(std::move(path));
  }
  return out;
}

double path_cost(const std::vector<ChainStage>& stages, double base, const std::vector<int>& pick) {
  if (pick.size() != stages.size()) throw_runtime("chain DP: path length differs from the stage count");
  double cost = base;
  for (size_t i = 0; i < stages.size(); ++i) {
    cost += stages[i].unary[pick[i]];
    if (i > 0) cost += stages[i].pair_in[size_t(pick[i - 1]) * stages[i].size + pick[i]];
  }
  return cost;
}

}  // namespace domino
