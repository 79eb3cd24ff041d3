// collective_split.cpp: measured_collective_splits (see collective_split.hpp).
#include "sim/compare/collective_split.hpp"

#include <algorithm>
#include <set>
#include <utility>

#include "sim/base/percentile.hpp"
#include "sim/trace/trace_iterations.hpp"

namespace domino {
namespace {

bool collective_kind(const std::string& kind) {
  const auto k = kinds_by_name().find(kind);
  return k != kinds_by_name().end() && collective(k->second);
}

// One collective in one iteration: each chosen rank's (arrival, end).
using Spans = std::vector<std::pair<double, double>>;

// Per collective op id, its spans on `ranks` in the iteration that `events` holds; ids some rank lacks are
// left out.
std::map<std::string, Spans> collective_spans(const std::vector<TraceEvent>& events,
                                              const std::set<int>& ranks) {
  std::map<std::string, Spans> out;
  for (const TraceEvent& e : events)
    if (ranks.count(e.rank) && collective_kind(e.kind))
      out[e.id].push_back({e.start_us, e.start_us + e.dur_us});
  for (auto it = out.begin(); it != out.end();)
    it = it->second.size() == ranks.size() ? std::next(it) : out.erase(it);
  return out;
}

struct Samples {
  std::vector<double> transfer, wait;
};

void add_iteration(const Spans& spans, Samples& s) {
  std::vector<double> arrivals, transfers;
  for (const auto& [arrival, end] : spans) arrivals.push_back(arrival);
  const double last = *std::max_element(arrivals.begin(), arrivals.end());
  for (const auto& [arrival, end] : spans) transfers.push_back(std::max(0.0, end - last));
  s.transfer.push_back(percentile(transfers, 0.5));
  s.wait.push_back(last - percentile(arrivals, 0.5));
}

}  // namespace

std::map<std::string, MeasuredCollectiveSplit> measured_collective_splits(const TraceFile& trace,
                                                                          const std::vector<int>& ranks,
                                                                          bool one_iteration) {
  const std::set<int> chosen(ranks.begin(), ranks.end());
  // Ranks on clocks of their own (several hosts) cannot say who arrived first.
  if (chosen.size() < 2 || !ranks_share_a_clock(trace)) return {};
  std::vector<std::vector<TraceEvent>> iterations =
      one_iteration ? std::vector<std::vector<TraceEvent>>{} : every_iteration(trace);
  if (iterations.empty()) iterations.push_back(trace.events);
  std::map<std::string, Samples> samples;
  for (const std::vector<TraceEvent>& events : iterations)
    for (const auto& [id, spans] : collective_spans(events, chosen)) add_iteration(spans, samples[id]);
  std::map<std::string, MeasuredCollectiveSplit> out;
  for (auto& [id, s] : samples) {
    std::sort(s.transfer.begin(), s.transfer.end());
    MeasuredCollectiveSplit& split = out[id];
    split.transfer_us = percentile_sorted(s.transfer, 0.5);
    split.transfer_p10_us = percentile_sorted(s.transfer, 0.1);
    split.transfer_p90_us = percentile_sorted(s.transfer, 0.9);
    double total = 0;
    for (double w : s.wait) total += w;
    split.wait_us = total / double(s.wait.size());
    split.iterations = int(s.wait.size());
  }
  return out;
}

}  // namespace domino
