// chain_dp_test.cpp: the K-best chain DP against exhaustive enumeration on random tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "tuner/chain_dp.hpp"

namespace domino {
namespace {

struct Tables {
  std::vector<std::vector<double>> unary, pair;
  std::vector<ChainStage> stages;
};

Tables random_tables(std::mt19937& rng, const std::vector<int>& sizes, bool with_inf, bool coarse) {
  Tables t;
  std::uniform_real_distribution<double> u(0, 10);
  std::uniform_int_distribution<int> small(0, 3);
  auto draw = [&] { return coarse ? double(small(rng)) : u(rng); };  // coarse: many exact ties
  t.unary.resize(sizes.size());
  t.pair.resize(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    for (int c = 0; c < sizes[i]; ++c) t.unary[i].push_back(draw());
    if (i > 0)
      for (int j = 0; j < sizes[i - 1] * sizes[i]; ++j)
        t.pair[i].push_back(with_inf && j % 5 == 2 ? std::numeric_limits<double>::infinity() : draw());
  }
  for (size_t i = 0; i < sizes.size(); ++i)
    t.stages.push_back({sizes[i], t.unary[i].data(), i > 0 ? t.pair[i].data() : nullptr});
  return t;
}

// Every path with its cost, cheapest first (ties: lexicographic from the last stage backwards).
std::vector<ChainPath> enumerate(const Tables& t, double base) {
  std::vector<ChainPath> all;
  std::vector<int> pick(t.stages.size(), 0);
  while (true) {
    const double c = path_cost(t.stages, base, pick);
    if (std::isfinite(c)) all.push_back({c, pick});
    int i = int(pick.size()) - 1;
    while (i >= 0 && ++pick[i] == t.stages[i].size) pick[i--] = 0;
    if (i < 0) break;
  }
  std::sort(all.begin(), all.end(), [](const ChainPath& a, const ChainPath& b) { return a.cost < b.cost; });
  return all;
}

TEST(ChainDp, KBestMatchesEnumerationOnRandomChains) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 2 + trial % 5;
    std::vector<int> sizes;
    for (int i = 0; i < n; ++i) sizes.push_back(1 + int(rng() % 4));
    const Tables t = random_tables(rng, sizes, trial % 3 == 0, false);
    const auto all = enumerate(t, 100.0);
    const int k = 1 + trial % 6;
    const auto best = k_best_paths(t.stages, 100.0, k);
    ASSERT_EQ(best.size(), std::min<size_t>(k, all.size())) << "trial " << trial;
    for (size_t j = 0; j < best.size(); ++j) {
      EXPECT_NEAR(best[j].cost, all[j].cost, 1e-9) << "trial " << trial << " rank " << j;
      EXPECT_NEAR(path_cost(t.stages, 100.0, best[j].pick), best[j].cost, 1e-9);
    }
    for (size_t a = 0; a < best.size(); ++a)
      for (size_t b = a + 1; b < best.size(); ++b) EXPECT_NE(best[a].pick, best[b].pick) << "duplicate path";
  }
}

TEST(ChainDp, WideStagesKeepTheKBestThroughManyPredecessors) {
  // More predecessors than k: only the k best predecessor lists are extended, which must still give
  // the k best paths (with ties and forbidden pairs in the tables).
  std::mt19937 rng(3);
  for (int trial = 0; trial < 6; ++trial) {
    const Tables t = random_tables(rng, {12, 15, 12, 10}, trial % 2 == 0, trial % 3 == 0);
    const auto all = enumerate(t, 0.0);
    const auto best = k_best_paths(t.stages, 0.0, 8);
    ASSERT_EQ(best.size(), 8u);
    for (size_t j = 0; j < best.size(); ++j)
      EXPECT_NEAR(best[j].cost, all[j].cost, 1e-9) << "trial " << trial;
  }
}

TEST(ChainDp, SparsePairTablesWithNegativeTermsKeepTheKBest) {
  // The tuner's tables: most pair terms exactly zero (blocks that cannot overlap), a few negative (overlap
  // gains) or positive. The DP scans the zero-term predecessors by their best partial cost and stops early;
  // it must still give the k best paths. Quarter steps keep every sum exact, so costs compare with ==.
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> quarter(-40, 40), nonzero(0, 3);
  for (int trial = 0; trial < 8; ++trial) {
    const std::vector<int> sizes = {10, 14, 12, 9};
    Tables t;
    t.unary.resize(sizes.size());
    t.pair.resize(sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) {
      for (int c = 0; c < sizes[i]; ++c) t.unary[i].push_back(0.25 * quarter(rng));
      if (i > 0)
        for (int j = 0; j < sizes[i - 1] * sizes[i]; ++j)
          t.pair[i].push_back(nonzero(rng) == 0 ? 0.25 * quarter(rng) : 0.0);
    }
    for (size_t i = 0; i < sizes.size(); ++i)
      t.stages.push_back({sizes[i], t.unary[i].data(), i > 0 ? t.pair[i].data() : nullptr});
    const auto all = enumerate(t, 50.0);
    const auto best = k_best_paths(t.stages, 50.0, 8);
    ASSERT_EQ(best.size(), 8u);
    for (size_t j = 0; j < best.size(); ++j) {
      EXPECT_EQ(best[j].cost, all[j].cost) << "trial " << trial << " rank " << j;
      EXPECT_EQ(path_cost(t.stages, 50.0, best[j].pick), best[j].cost) << "trial " << trial << " rank " << j;
    }
  }
}

TEST(ChainDp, TiesAreBrokenTheSameWayEveryTime) {
  std::mt19937 rng(11);
  const Tables t = random_tables(rng, {3, 3, 3, 3}, false, true);
  const auto a = k_best_paths(t.stages, 0, 5);
  const auto b = k_best_paths(t.stages, 0, 5);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].pick, b[i].pick);
  // Among paths of equal cost, the first returned prefers the lowest last-stage option.
  const auto all = enumerate(t, 0);
  int lowest_last = 99;
  for (const auto& p : all)
    if (p.cost == all.front().cost) lowest_last = std::min(lowest_last, p.pick.back());
  EXPECT_EQ(a.front().pick.back(), lowest_last);
}

TEST(ChainDp, ForbiddenTransitionsAreNeverUsed) {
  const std::vector<double> u0 = {0, 0}, u1 = {0, 0};
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> p1 = {inf, 5, 1, inf};  // only 0->1 and 1->0 allowed
  const std::vector<ChainStage> stages = {{2, u0.data(), nullptr}, {2, u1.data(), p1.data()}};
  const auto best = k_best_paths(stages, 0, 10);
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].pick, (std::vector<int>{1, 0}));
  EXPECT_EQ(best[1].pick, (std::vector<int>{0, 1}));
}

}  // namespace
}  // namespace domino
