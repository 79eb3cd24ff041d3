// calibrate_transfer.cpp: `--fit transfer`: one bus-bandwidth scale for every collective kind of a level,
// from the collectives' transfers as training ran them. Over loopback a collective transfers more slowly
// between compute ops than in the profiler's probe (cpu-gpt's 1.5 MiB AllReduce at 0.46 of the probe's bus
// bandwidth, the sequence-parallel AllGathers alike; docs/fidelity.md), and a calibration plan holds one kind
// at one size: the scale it gives stands for the level's transport, every kind's curves alike.
#include <fmt/format.h>

#include <set>

#include "sim/fit/calibrate_terms.hpp"
#include "sim/fit/stats.hpp"

namespace domino::prof::calibration {
namespace {

constexpr size_t kMinIterations = 5;  // a collective's transfer is its median over at least these
constexpr int kMinCollectives = 3;

// The latency the base profile charges a collective of `kind` that ran `algorithm`.
double curve_latency(const CollectiveProfile& level, OpKind kind, const std::string& algorithm) {
  const std::optional<AlgorithmCurves> c = kind_curves(level, kind);
  if (!c) return 0;
  const bool nvls = collective_algorithm_from_name(algorithm) == CollectiveAlgorithm::Nvls;
  return nvls && c->nvls ? c->nvls->latency_us : c->ring.latency_us;
}

}  // namespace

void fit_transfer_bandwidth(const TraceSamples& in, const std::vector<std::vector<TraceEvent>>& iterations,
                            Profile& p, std::string& report) {
  if (in.tp <= 1) return;
  const std::map<int, std::vector<CollectiveRun>> runs = collective_runs(iterations);
  const CollectiveProfile& old = group_collective(in.base, in.tp);
  const CostModel cm(in.base);
  // Least squares of measured over predicted bandwidth term through the origin, each op weighted by its
  // measured transfer's inverse square (relative errors: small and large messages count alike).
  double sxy = 0, sxx = 0;
  int used = 0;
  std::set<std::string> kinds;
  for (const Sample& s : in.samples) {
    const auto it = runs.find(s.index);
    if (!collective(s.op.kind) || it == runs.end() || it->second.size() < kMinIterations) continue;
    std::vector<double> durations;
    for (const CollectiveRun& run : it->second) durations.push_back(run.dur);
    const double transfer = median_of(durations);
    const CollectiveCost t = cm.collective_cost(s.op.kind, s.op.bytes, in.tp, in.devices_per_node);
    const double latency = curve_latency(old, s.op.kind, t.algorithm);
    const double predicted = t.us - old.sync_us - latency;
    if (!(predicted > 0) || !(transfer > latency)) continue;
    const double w = 1 / (transfer * transfer);
    sxy += w * predicted * (transfer - latency);
    sxx += w * predicted * predicted;
    ++used;
    kinds.insert(to_string(s.op.kind));
  }
  if (used < kMinCollectives || !(sxy > 0)) {
    report += fmt::format("transfer: not fitted ({} collectives over {} or more iterations, {} needed)\n",
                          used, kMinIterations, kMinCollectives);
    return;
  }
  const double slower = sxy / sxx;  // measured over predicted bandwidth term: the bus bandwidth's divisor
  CollectiveProfile& level = group_collective(p, in.tp);
  for (OpKind kind : {OpKind::AllReduce, OpKind::AllGather, OpKind::ReduceScatter}) {
    std::optional<AlgorithmCurves> c = kind_curves(level, kind);
    if (!c) continue;
    divide_bus_bandwidth(c->ring, slower);
    if (c->nvls) divide_bus_bandwidth(*c->nvls, slower);
    set_kind_curves(level, kind, *c);
  }
  std::string from;
  for (const std::string& k : kinds) from += (from.empty() ? "" : ", ") + k;
  report +=
      fmt::format("transfer ({} {} ops, median over {} iterations): every kind's bus bandwidth x {:.3f}\n",
                  used, from, iterations.size(), 1 / slower);
}

}  // namespace domino::prof::calibration
