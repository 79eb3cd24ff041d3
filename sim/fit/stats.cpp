// stats.cpp: percentiles, weighted least squares, log binning.
#include "sim/fit/stats.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>

#include "sim/base/percentile.hpp"

namespace domino::prof {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return percentile_sorted(v, 0.5);
}

double mean_of(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / double(v.size());
}

double wait_for_last(std::vector<double> arrivals_us) {
  if (arrivals_us.empty()) return 0;
  const double last = *std::max_element(arrivals_us.begin(), arrivals_us.end());
  return last - median_of(std::move(arrivals_us));
}

Timing timing_of(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  Timing t;
  t.repeats = int(samples.size());
  t.median_us = percentile_sorted(samples, 0.5);
  t.p10_us = percentile_sorted(samples, 0.1);
  t.p90_us = percentile_sorted(samples, 0.9);
  return t;
}

LineFit fit_line(const std::vector<double>& x, const std::vector<double>& y, const std::vector<double>& w) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sw += w[i];
    sx += w[i] * x[i];
    sy += w[i] * y[i];
    sxx += w[i] * x[i] * x[i];
    sxy += w[i] * x[i] * y[i];
  }
  LineFit f;
  const double det = sw * sxx - sx * sx;
  if (x.size() < 2 || !(std::abs(det) > 1e-300 * std::max(1.0, sw * sxx))) return f;
  f.b = (sw * sxy - sx * sy) / det;
  f.a = (sy - f.b * sx) / sw;
  f.ok = std::isfinite(f.a) && std::isfinite(f.b);
  return f;
}

LineFit fit_slope(const std::vector<double>& x, const std::vector<double>& y, const std::vector<double>& w, double a) {
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxx += w[i] * x[i] * x[i];
    sxy += w[i] * x[i] * (y[i] - a);
  }
  LineFit f;
  f.a = a;
  if (!(sxx > 0)) return f;
  f.b = sxy / sxx;
  f.ok = std::isfinite(f.b);
  return f;
}

namespace {

// Solves the normal equations of the columns picked by `mask` (Gaussian elimination with partial pivoting);
// empty when they are singular.
std::vector<double> solve_subset(const std::vector<std::vector<double>>& cols, const std::vector<double>& y,
                                 const std::vector<double>& w, unsigned mask) {
  std::vector<size_t> use;
  for (size_t j = 0; j < cols.size(); ++j)
    if (mask >> j & 1u) use.push_back(j);
  const size_t k = use.size();
  std::vector<std::vector<double>> a(k, std::vector<double>(k + 1, 0));
  for (size_t i = 0; i < y.size(); ++i)
    for (size_t r = 0; r < k; ++r) {
      for (size_t c = 0; c < k; ++c) a[r][c] += w[i] * cols[use[r]][i] * cols[use[c]][i];
      a[r][k] += w[i] * cols[use[r]][i] * y[i];
    }
  double scale = 0;
  for (size_t r = 0; r < k; ++r) scale = std::max(scale, std::abs(a[r][r]));
  for (size_t c = 0; c < k; ++c) {
    size_t pivot = c;
    for (size_t r = c + 1; r < k; ++r)
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    if (!(std::abs(a[pivot][c]) > 1e-12 * scale)) return {};
    std::swap(a[c], a[pivot]);
    for (size_t r = 0; r < k; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (size_t j = c; j <= k; ++j) a[r][j] -= f * a[c][j];
    }
  }
  std::vector<double> coef(cols.size(), 0);
  for (size_t r = 0; r < k; ++r) coef[use[r]] = a[r][k] / a[r][r];
  return coef;
}

}  // namespace

NonNegativeFit fit_non_negative(const std::vector<std::vector<double>>& columns, const std::vector<double>& y,
                                const std::vector<double>& w) {
  NonNegativeFit best;
  double best_sse = 0;
  for (unsigned mask = 1; mask < 1u << columns.size(); ++mask) {
    if (size_t(std::popcount(mask)) > y.size()) continue;
    const std::vector<double> c = solve_subset(columns, y, w, mask);
    if (c.empty() || std::any_of(c.begin(), c.end(), [](double v) { return !(v >= 0) || !std::isfinite(v); }))
      continue;
    double sse = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      double fitted = 0;
      for (size_t j = 0; j < columns.size(); ++j) fitted += c[j] * columns[j][i];
      sse += w[i] * (fitted - y[i]) * (fitted - y[i]);
    }
    if (!best.ok || sse < best_sse) best = {c, true}, best_sse = sse;
  }
  return best;
}

std::vector<double> relative_weights(const std::vector<double>& y) {
  std::vector<double> w;
  for (double v : y) w.push_back(v > 0 ? 1.0 / (v * v) : 0.0);
  return w;
}

std::vector<CurvePoint> log_binned_median(const std::vector<double>& x, const std::vector<double>& y, double decades) {
  std::map<long, std::pair<std::vector<double>, std::vector<double>>> bins;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!(x[i] > 0) || !std::isfinite(y[i])) continue;
    auto& b = bins[long(std::floor(std::log10(x[i]) / decades))];
    b.first.push_back(std::log(x[i]));
    b.second.push_back(y[i]);
  }
  std::vector<CurvePoint> out;
  for (auto& [key, b] : bins) {
    double lx = 0;
    for (double v : b.first) lx += v;
    out.push_back({std::exp(lx / double(b.first.size())), median_of(b.second)});
  }
  return out;  // map order: bins ascending, and each bin's mean lies inside it, so x strictly increases
}

nlohmann::json to_json(const Timing& t) {
  return {{"median_us", t.median_us}, {"p10_us", t.p10_us}, {"p90_us", t.p90_us}, {"repeats", t.repeats}};
}

Timing timing_from_json(const nlohmann::json& j) {
  Timing t;
  t.median_us = j.at("median_us").get<double>();
  t.p10_us = j.at("p10_us").get<double>();
  t.p90_us = j.at("p90_us").get<double>();
  t.repeats = j.at("repeats").get<int>();
  return t;
}

}  // namespace domino::prof
