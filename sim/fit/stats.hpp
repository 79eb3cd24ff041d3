// stats.hpp: the statistics the profiler and the calibrator share: a measured quantity's median and
// p10/p90 spread, the small least-squares fits, a per-row excess, log binning.
#pragma once

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace domino::prof {

// A measured quantity: median of the repeats, with the 10th and 90th percentiles.
struct Timing {
  double median_us = 0, p10_us = 0, p90_us = 0;
  int repeats = 0;
  // Relative half-width of the p10..p90 band: the run-to-run spread recorded in the profile.
  double spread() const { return median_us > 0 ? (p90_us - p10_us) / (2 * median_us) : 0; }
};
Timing timing_of(std::vector<double> samples_us);
double median_of(std::vector<double> v);
double mean_of(const std::vector<double>& v);  // 0 when empty
// What the ranks' arrival skew at one collective costs the typical rank: the last rank's arrival minus the
// median rank's (given each rank's arrival time). The simulator runs one rank whose compute is the median
// rank's, and every rank leaves the collective when the last has arrived; the full spread, last minus first,
// would count the early rank's wait, which the median rank does not have (half of it with two ranks).
double wait_for_last(std::vector<double> arrivals_us);

// Weighted least squares for y = a + b x (weights w >= 0). fixed_a: fit only b with a given.
struct LineFit {
  double a = 0, b = 0;
  bool ok = false;
};
LineFit fit_line(const std::vector<double>& x, const std::vector<double>& y, const std::vector<double>& w);
LineFit fit_slope(const std::vector<double>& x, const std::vector<double>& y, const std::vector<double>& w, double a);
// Weighted least squares for y = sum_j c_j x_j with every c_j >= 0 (columns[j] holds x_j over the points; at
// most a handful of columns): the best fit over the subsets of columns whose unconstrained solution is
// non-negative, the others' coefficients 0. ok false when no subset can be solved (too few points).
struct NonNegativeFit {
  std::vector<double> c;
  bool ok = false;
};
NonNegativeFit fit_non_negative(const std::vector<std::vector<double>>& columns, const std::vector<double>& y,
                                const std::vector<double>& w);
// A per-row term that keeps the total time: what the points took above the rest of their cost, summed, over
// their rows summed (as an iteration adds them up); never below 0, and 0 without rows.
struct PerRowExcess {
  double above_us = 0, rows = 0;
  int points = 0;
  void add(double measured_us, double rest_us, double point_rows) {
    above_us += measured_us - rest_us, rows += point_rows, ++points;
  }
  double per_row_us() const { return rows > 0 ? std::max(0.0, above_us / rows) : 0; }
};
// Weights 1/y^2: least squares on relative errors (sizes span decades).
std::vector<double> relative_weights(const std::vector<double>& y);

// One entry of a log-binned curve: geometric-mean x and median y of the points in the bin.
struct CurvePoint {
  double x = 0, y = 0;
};
// Bins points by log10(x) into bins of `decades` width; x strictly increasing in the result.
std::vector<CurvePoint> log_binned_median(const std::vector<double>& x, const std::vector<double>& y, double decades);

nlohmann::json to_json(const Timing& t);
Timing timing_from_json(const nlohmann::json& j);

}  // namespace domino::prof
