// profile_fit_terms.hpp: what fit_profile shares with its per-term fits: the measured points merged over
// the ranks and one function per cost term (memory-bound ops, GEMM, attention, collectives, arrival skew,
// interference). Each fit fills its part of the profile and appends to the summary and the notes.
#pragma once

#include <string>
#include <vector>

#include "sim/fit/profile_fit.hpp"
#include "sim/fit/stats.hpp"

namespace domino::prof::fitting {

// One compute probe: its entry (kind, label, shape, flops, bytes) and the timing pooled over the ranks.
struct Point {
  nlohmann::json entry;
  Timing t;
};

// What a fit writes: the profile, the human-readable summary and the profile's notes.
struct FitOutput {
  Profile& p;
  std::string& summary;
  std::string& notes;
};

std::vector<double> samples(const nlohmann::json& j);
double p90(std::vector<double> v);

// The terms, in the order fit_profile applies them.
void fit_memory_general(const std::vector<Point>& compute, FitOutput out);
void fit_memory_per_kind(const std::vector<Point>& compute, FitOutput out);
// Returns the peak in FLOP/us (full precision: attention's efficiencies are relative to it).
double fit_gemm(const FitInput& in, const std::vector<Point>& compute, FitOutput out);
void fit_attention(const std::vector<Point>& compute, double peak, FitOutput out);
// attention.per_code where it times the probes better than the curve; last, on the otherwise complete
// profile.
void fit_attention_per_code(const std::vector<Point>& compute, FitOutput out);
void fit_collectives(const FitInput& in, FitOutput out);  // AllReduce, AllGather, ReduceScatter
void fit_arrival_skew(const FitInput& in, FitOutput out);
void fit_interference(const FitInput& in, FitOutput out);

}  // namespace domino::prof::fitting
