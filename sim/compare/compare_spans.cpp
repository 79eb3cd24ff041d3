// compare_spans.cpp: figures computed from the spans of one rank alone: busy and exposed communication
// time (interval unions) and the critical path (inferred predecessors, since traces carry no deps).
#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "sim/compare/compare.hpp"

namespace domino {
namespace {

using Interval = std::pair<double, double>;

// Sorted, disjoint union of the spans.
std::vector<Interval> merge(std::vector<Interval> spans) {
  std::sort(spans.begin(), spans.end());
  std::vector<Interval> out;
  for (const auto& s : spans) {
    if (s.second <= s.first) continue;
    if (!out.empty() && s.first <= out.back().second) {
      out.back().second = std::max(out.back().second, s.second);
    } else {
      out.push_back(s);
    }
  }
  return out;
}

double length(const std::vector<Interval>& v) {
  double total = 0;
  for (const auto& s : v) total += s.second - s.first;
  return total;
}

// Measure of the intersection of two sorted disjoint interval lists.
double overlap(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  double total = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    double lo = std::max(a[i].first, b[j].first);
    double hi = std::min(a[i].second, b[j].second);
    if (hi > lo) total += hi - lo;
    if (a[i].second < b[j].second) ++i; else ++j;
  }
  return total;
}

double end_of(const TraceEvent* e) { return e->start_us + e->dur_us; }

// Ends within this of a start count as "finished before it": writers round ts and dur independently.
constexpr double kTouchUs = 1e-3;

}  // namespace

StreamUsage stream_usage(const std::vector<const TraceEvent*>& rank_events) {
  std::vector<Interval> compute, comm;
  for (const TraceEvent* e : rank_events) (e->stream == 0 ? compute : comm).emplace_back(e->start_us, end_of(e));
  auto compute_union = merge(std::move(compute));
  auto comm_union = merge(std::move(comm));
  StreamUsage u;
  u.compute_busy_us = length(compute_union);
  u.comm_busy_us = length(comm_union);
  u.exposed_comm_us = std::max(0.0, u.comm_busy_us - overlap(comm_union, compute_union));
  return u;
}

std::vector<const TraceEvent*> critical_path(const std::vector<const TraceEvent*>& rank_events) {
  if (rank_events.empty()) return {};
  // Per stream: ops by start (stream order), and by end (to find the latest finisher before a time).
  std::vector<const TraceEvent*> by_start[2], by_end[2];
  for (const TraceEvent* e : rank_events) {
    int s = e->stream == 0 ? 0 : 1;
    by_start[s].push_back(e);
    by_end[s].push_back(e);
  }
  for (int s = 0; s < 2; ++s) {
    std::stable_sort(by_start[s].begin(), by_start[s].end(),
                     [](auto* a, auto* b) { return std::pair(a->start_us, end_of(a)) < std::pair(b->start_us, end_of(b)); });
    std::stable_sort(by_end[s].begin(), by_end[s].end(), [](auto* a, auto* b) { return end_of(a) < end_of(b); });
  }
  std::unordered_map<const TraceEvent*, size_t> position;  // index in its stream's by_start
  for (int s = 0; s < 2; ++s)
    for (size_t i = 0; i < by_start[s].size(); ++i) position[by_start[s][i]] = i;

  const TraceEvent* current = *std::max_element(rank_events.begin(), rank_events.end(), [](auto* a, auto* b) {
    // Ties: the later start (a zero-length op after its predecessor), then the compute stream.
    return std::tuple(end_of(a), a->start_us, -a->stream) < std::tuple(end_of(b), b->start_us, -b->stream);
  });
  std::set<const TraceEvent*> visited;  // zero-length ops on both streams could otherwise loop
  std::vector<const TraceEvent*> path;
  while (current) {
    path.push_back(current);
    visited.insert(current);
    const int s = current->stream == 0 ? 0 : 1;
    const double limit = current->start_us + kTouchUs;

    const TraceEvent* same = nullptr;
    size_t pos = position.at(current);
    if (pos > 0 && !visited.count(by_start[s][pos - 1]) && end_of(by_start[s][pos - 1]) <= limit) same = by_start[s][pos - 1];

    const TraceEvent* other = nullptr;
    const auto& ends = by_end[1 - s];
    auto it = std::upper_bound(ends.begin(), ends.end(), limit, [](double t, auto* e) { return t < end_of(e); });
    while (it != ends.begin()) {
      --it;
      if (!visited.count(*it)) { other = *it; break; }
    }
    // The later finisher is what the op waited for; on a tie the same stream is the simpler explanation.
    if (same && (!other || end_of(same) >= end_of(other))) current = same;
    else current = other;
  }
  std::reverse(path.begin(), path.end());
  return path;
}

}  // namespace domino
