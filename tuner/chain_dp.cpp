// chain_dp.cpp: K-best Viterbi. Each (stage, option) keeps its k cheapest partial paths; a partial path
// is extended only through the k best of its predecessor, which is exact for the k best full paths. Per
// (stage, option) the work is one pass over the predecessors plus k x k candidates, not predecessors x k.
#include "tuner/chain_dp.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "sim/base/error.hpp"

namespace domino {
namespace {

struct Entry {
  double cost;
  int prev_option;  // -1 at stage 0
  int prev_rank;
};

// A function object, so that the sorts and heaps inline it.
struct EntryLess {
  bool operator()(const Entry& a, const Entry& b) const {
    if (a.cost != b.cost) return a.cost < b.cost;
    return std::tie(a.prev_option, a.prev_rank) < std::tie(b.prev_option, b.prev_rank);
  }
};
constexpr EntryLess entry_less;

using Lists = std::vector<std::vector<Entry>>;  // per option: up to k entries, sorted by entry_less

// A pair table column by column ([this * prev_size + prev]): one option's predecessors side by side, with
// each column's smallest term (NaN ignored).
struct Columns {
  std::vector<double> terms;
  std::vector<double> min;
};
Columns by_column(const double* table, int prev_size, int size) {
  Columns out{std::vector<double>(size_t(prev_size) * size), std::vector<double>(size_t(size))};
  for (int p = 0; p < prev_size; ++p)
    for (int c = 0; c < size; ++c) out.terms[size_t(c) * prev_size + p] = table[size_t(p) * size + c];
  for (int c = 0; c < size; ++c) {
    double m = std::numeric_limits<double>::infinity();
    for (int p = 0; p < prev_size; ++p) m = std::min(m, out.terms[size_t(c) * prev_size + p]);
    out.min[size_t(c)] = m;
  }
  return out;
}

// The predecessors with the k best (cost, option) among cost = (front[p] + w[p]) + u, sorted by
// entry_less, into heads. Predecessors are visited by ascending front (`by_front`); min_w <= every w[p], so
// (front[p] + min_w) + u bounds the cost of p and of every later one (rounding is monotone), and the scan
// stops once that bound exceeds the worst of k heads. Infinite costs never enter.
void best_heads(const std::vector<double>& front, const std::vector<int>& by_front, const double* w,
                double min_w, double u, int k, std::vector<Entry>& heads) {
  heads.clear();
  double worst = std::numeric_limits<double>::infinity();
  for (const int p : by_front) {
    if (heads.size() == size_t(k) && (front[size_t(p)] + min_w) + u > worst) break;
    const double cost = (front[size_t(p)] + w[p]) + u;
    if (!(cost < std::numeric_limits<double>::infinity())) continue;
    const Entry e{cost, p, 0};
    if (heads.size() == size_t(k) && !entry_less(e, heads.back())) continue;
    heads.insert(std::upper_bound(heads.begin(), heads.end(), e, entry_less), e);
    if (heads.size() > size_t(k)) heads.pop_back();
    if (heads.size() == size_t(k)) worst = heads.back().cost;
  }
}

// The k best partial paths ending in each option of stage `st`, from those of the stage before. Each
// predecessor's list is sorted, so its entries extended by (w + u) stay sorted under (cost, option, rank):
// the k best extensions come from the predecessors with the k best first entries.
Lists extend(const Lists& prev, const ChainStage& st, const Columns& columns, int k) {
  const int prev_size = int(prev.size());
  std::vector<double> front(prev_size, std::numeric_limits<double>::infinity());
  for (int p = 0; p < prev_size; ++p)
    if (!prev[p].empty()) front[p] = prev[p].front().cost;
  std::vector<int> by_front(prev.size());
  for (int p = 0; p < prev_size; ++p) by_front[size_t(p)] = p;
  std::stable_sort(by_front.begin(), by_front.end(),
                   [&](int a, int b) { return front[size_t(a)] < front[size_t(b)]; });
  Lists out(st.size);
  std::vector<Entry> heads, pool;  // heads: the k best first entries, sorted by entry_less
  heads.reserve(size_t(k) + 1);
  for (int c = 0; c < st.size; ++c) {
    const double u = st.unary[c];
    if (!std::isfinite(u)) continue;
    const double* w = columns.terms.data() + size_t(c) * prev_size;
    best_heads(front, by_front, w, columns.min[size_t(c)], u, k, heads);
    // Rank r of the h-th best head follows h first entries and r entries of its own: only r < k - h can
    // be among the k best.
    pool.clear();
    for (size_t h = 0; h < heads.size(); ++h) {
      const int p = heads[h].prev_option;
      const int ranks = std::min(int(prev[p].size()), k - int(h));
      for (int r = 0; r < ranks; ++r) pool.push_back({prev[p][r].cost + w[p] + u, p, r});
    }
    const size_t keep = std::min(pool.size(), size_t(k));
    std::partial_sort(pool.begin(), pool.begin() + keep, pool.end(), entry_less);
    out[c].assign(pool.begin(), pool.begin() + keep);
  }
  return out;
}

}  // namespace

std::vector<ChainPath> k_best_paths(const std::vector<ChainStage>& stages, double base, int k) {
  if (k < 1 || stages.empty()) return {};
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i].size < 1 || !stages[i].unary || (i > 0 && !stages[i].pair_in))
      throw_runtime("chain DP: malformed stage " + std::to_string(i));
  }
  std::vector<Lists> best(stages.size());
  best[0].resize(stages[0].size);
  for (int c = 0; c < stages[0].size; ++c) {
    const double u = stages[0].unary[c];
    if (std::isfinite(u)) best[0][c].push_back({base + u, -1, 0});
  }
  // Stages of one class share their pair table: turn each distinct table into columns once.
  std::map<std::tuple<const double*, int, int>, Columns> columns;
  for (size_t i = 1; i < stages.size(); ++i) {
    const auto key = std::make_tuple(stages[i].pair_in, stages[i - 1].size, stages[i].size);
    auto it = columns.find(key);
    if (it == columns.end())
      it = columns.emplace(key, by_column(stages[i].pair_in, stages[i - 1].size, stages[i].size)).first;
    best[i] = extend(best[i - 1], stages[i], it->second, k);
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
