// compare.cpp: compare_traces, aligning the predicted and the measured trace op by op and deriving the
// error figures (iteration time, per-op duration error by kind, the ops that explain the difference).
#include "sim/compare/compare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "sim/base/error.hpp"
#include "sim/compare/collective_split.hpp"

namespace domino {
namespace {

// A rank that started the measured iteration later than this (and than this share of the iteration) after the
// earliest: on a busy host a rank descheduled as it leaves the barrier (milliseconds, seen at 2 Gbit/s).
constexpr double kLateRankUs = 1000, kLateRankShare = 0.01;

// Measured traces of ranks on one clock say how late each rank started (rank_start_offsets_us): such a rank's
// ops show late, and the ranks before it wait for it at their first collective.
void warn_of_late_ranks(const TraceFile& measured, double iteration_us, std::vector<std::string>& warnings) {
  const auto offsets = measured.meta.find("rank_start_offsets_us");
  if (offsets == measured.meta.end() || !offsets->is_array()) return;
  for (size_t rank = 0; rank < offsets->size(); ++rank) {
    const nlohmann::json& late = (*offsets)[rank];
    if (late.is_number() && late.get<double>() > std::max(kLateRankUs, kLateRankShare * iteration_us))
      warnings.push_back(fmt::format(
          "rank {} started the measured iteration {:.1f} ms after the earliest (it left the barrier late):"
          " its ops show late, and the other ranks' wait for it at a collective is in the iteration",
          rank, late.get<double>() / 1e3));
  }
}

using RankEvents = std::map<int, std::vector<const TraceEvent*>>;

RankEvents by_rank(const TraceFile& t) {
  RankEvents out;
  for (const TraceEvent& e : t.events) out[e.rank].push_back(&e);
  return out;
}

std::string rank_list(const RankEvents& r) {
  std::string s;
  for (const auto& [rank, _] : r) s += (s.empty() ? "" : ", ") + std::to_string(rank);
  return s;
}

// The ranks of one side that the comparison uses.
std::vector<int> pick_ranks(const TraceFile& t, const RankEvents& r, int wanted, bool allow_rank0_stand_in) {
  std::vector<int> out;
  if (wanted < 0) {
    for (const auto& [rank, _] : r) out.push_back(rank);
  } else if (r.count(wanted)) {
    out.push_back(wanted);
  } else if (allow_rank0_stand_in && r.size() == 1 && r.count(0)) {
    out.push_back(0);  // a rank-0-only prediction stands for every rank
  } else {
    throw_bad_input(t.path + ": no rank " + std::to_string(wanted) + " in this trace (ranks: " + rank_list(r) + ")");
  }
  return out;
}

// Per op id over the chosen ranks: durations (and their spread over the iterations where the trace has it),
// kind, and where it first appears (for ordering).
struct OpStats {
  std::string kind;
  std::string phase;
  std::vector<double> durations, p10s, p90s;
  std::vector<double> arrival_waits;  // predicted collectives' (TraceEvent::arrival_wait_us), where recorded
  double first_start = 0;
  size_t first_index = 0;
};

std::map<std::string, OpStats> op_stats(const TraceFile& t, const std::vector<int>& ranks, bool one_iteration) {
  std::set<int> wanted(ranks.begin(), ranks.end());
  std::map<std::string, OpStats> out;
  for (size_t i = 0; i < t.events.size(); ++i) {
    const TraceEvent& e = t.events[i];
    if (!wanted.count(e.rank)) continue;
    auto [it, fresh] = out.try_emplace(e.id);
    if (fresh) {
      it->second.kind = e.kind;
      if (const auto phase = e.args.find("phase"); phase != e.args.end() && phase->is_string())
        it->second.phase = phase->get<std::string>();
      it->second.first_start = e.start_us;
      it->second.first_index = i;
    }
    const bool spread = e.spread.samples > 0 && !one_iteration;
    it->second.durations.push_back(spread ? e.spread.median_us : e.dur_us);
    if (spread) it->second.p10s.push_back(e.spread.p10_us), it->second.p90s.push_back(e.spread.p90_us);
    if (e.arrival_wait_us >= 0) it->second.arrival_waits.push_back(e.arrival_wait_us);
  }
  return out;
}

// How the measured durations were taken, from the trace's spans: for the report.
std::string measured_durations(const TraceFile& t, bool one_iteration) {
  int fewest = 0, most = 0;
  for (const TraceEvent& e : t.events) {
    if (e.spread.samples <= 0) continue;
    fewest = fewest == 0 ? e.spread.samples : std::min(fewest, e.spread.samples);
    most = std::max(most, e.spread.samples);
  }
  if (most == 0) return "the trace's one iteration";
  if (one_iteration) return "the trace's one iteration (--op-time iteration; the medians were recorded)";
  const std::string n = fewest == most ? std::to_string(most) : std::to_string(fewest) + "-" + std::to_string(most);
  return "per op, the median over its " + n + " timed iterations";
}

std::vector<std::string> in_trace_order(const std::map<std::string, OpStats>& ops) {
  std::vector<std::string> ids;
  for (const auto& [id, _] : ops) ids.push_back(id);
  std::sort(ids.begin(), ids.end(), [&](const std::string& a, const std::string& b) {
    const OpStats &x = ops.at(a), &y = ops.at(b);
    return std::pair(x.first_start, x.first_index) < std::pair(y.first_start, y.first_index);
  });
  return ids;
}

SideSummary summarise(const TraceFile& t, const RankEvents& r, const std::vector<int>& ranks, int path_rank) {
  SideSummary s;
  s.path = t.path;
  s.source = t.source;
  s.ranks = ranks;
  double first = INFINITY, last = -INFINITY;
  std::vector<double> comm, exposed;
  for (int rank : ranks) {
    for (const TraceEvent* e : r.at(rank)) {
      first = std::min(first, e->start_us);
      last = std::max(last, e->start_us + e->dur_us);
    }
    StreamUsage u = stream_usage(r.at(rank));
    comm.push_back(u.comm_busy_us);
    exposed.push_back(u.exposed_comm_us);
  }
  const auto meta_time = t.meta.find("iteration_time_us");
  const bool in_meta = meta_time != t.meta.end() && meta_time->is_number();
  const double recorded = in_meta ? meta_time->get<double>() : 0;
  if (!(recorded >= 0 && recorded <= kMaxTimeUs))
    throw_bad_input(t.path + ": domino.iteration_time_us is " + meta_time->dump() + ", not a time");
  if (const double mean = mean_iteration_us(t); mean > 0) {
    s.iteration_us = mean;
    s.iteration_from = "samples";
  } else if (recorded > 0) {  // 0: not recorded
    s.iteration_us = recorded;
    s.iteration_from = "meta";
  } else {
    s.iteration_us = last - first;
    s.iteration_from = "spans";
  }
  s.comm_busy_us = percentile(comm, 0.5);
  s.exposed_comm_us = percentile(exposed, 0.5);
  s.overlap_fraction = s.comm_busy_us > 0 ? 1.0 - s.exposed_comm_us / s.comm_busy_us : 0.0;
  s.critical_rank = path_rank;
  for (const TraceEvent* e : critical_path(r.at(path_rank))) s.critical_path.push_back(e->id);
  return s;
}

// The rank whose last op finishes latest: the one that set the iteration time.
int slowest_rank(const RankEvents& r, const std::vector<int>& ranks) {
  int best = ranks.front();
  double best_end = -INFINITY;
  for (int rank : ranks) {
    for (const TraceEvent* e : r.at(rank)) {
      if (e->start_us + e->dur_us > best_end) best_end = e->start_us + e->dur_us, best = rank;
    }
  }
  return best;
}

// A collective whose prediction recorded its arrival wait on every rank, measured on two ranks or more: its
// transfer and its wait judged apart (collective_split.hpp).
void split_collective(const OpStats& p, const MeasuredCollectiveSplit& m, OpComparison& op) {
  if (p.arrival_waits.empty() || p.arrival_waits.size() != p.durations.size()) return;
  op.predicted_wait_us = percentile(p.arrival_waits, 0.5);
  op.predicted_us = std::max(0.0, op.predicted_us - op.predicted_wait_us);
  op.measured_wait_us = m.wait_us;
  op.measured_us = m.transfer_us;
  op.measured_p10_us = m.iterations > 1 ? m.transfer_p10_us : -1;
  op.measured_p90_us = m.iterations > 1 ? m.transfer_p90_us : -1;
}

// The arrival waits the prediction charged (a collective the ranks reach together is charged none and not
// scored), as one kind; and what a split collective was judged on (`every_iteration`: over the timed
// iterations).
void add_wait_figures(Comparison& c, bool every_iteration) {
  std::vector<double> errors;
  std::map<std::string, PhaseWaits> by_phase;  // every split collective, by phase
  for (const OpComparison& op : c.ops) {
    if (op.predicted_wait_us < 0) continue;  // not split
    PhaseWaits& w = by_phase[op.phase.empty() ? "unnamed" : op.phase];
    ++w.count;
    w.predicted_mean_us += op.predicted_wait_us;
    w.measured_mean_us += op.measured_wait_us;
    if (op.predicted_wait_us > 0)
      errors.push_back(std::abs(op.measured_wait_us - op.predicted_wait_us) / op.predicted_wait_us * 100);
  }
  if (!by_phase.empty())
    c.measured_durations +=
        std::string(
            "; a collective's, its transfer from the last rank's arrival (median over "
            "the ranks) and its wait for that rank apart (row \"arrival wait\"), ") +
        (every_iteration ? "the transfer's median and the wait's mean over the timed iterations"
                         : "in the trace's one iteration (no domino.iteration_spans)");
  if (!errors.empty())
    c.by_kind.push_back(
        {kArrivalWaitKind, percentile(errors, 0.5), percentile(errors, 0.9), int(errors.size()), -1.0});
  for (auto& [phase, w] : by_phase) {
    w.phase = phase;
    w.predicted_mean_us /= w.count;
    w.measured_mean_us /= w.count;
    c.waits_by_phase.push_back(w);
  }
}

void add_error_figures(Comparison& c) {
  std::vector<double> all, all_spread;
  std::map<std::string, std::vector<double>> per_kind, per_kind_spread;
  int unscored = 0;
  for (const OpComparison& op : c.ops) {
    if (op.error_pct < 0) { ++unscored; continue; }
    all.push_back(op.error_pct);
    per_kind[op.kind].push_back(op.error_pct);
    if (op.spread_pct() < 0) continue;
    all_spread.push_back(op.spread_pct());
    per_kind_spread[op.kind].push_back(op.spread_pct());
  }
  c.scored_ops = static_cast<int>(all.size());
  c.op_error_median_pct = percentile(all, 0.5);
  c.op_error_p90_pct = percentile(all, 0.9);
  if (!all_spread.empty()) c.op_spread_median_pct = percentile(all_spread, 0.5);
  for (const auto& [kind, v] : per_kind) {
    const auto spread = per_kind_spread.find(kind);
    c.by_kind.push_back({kind, percentile(v, 0.5), percentile(v, 0.9), static_cast<int>(v.size()),
                         spread == per_kind_spread.end() ? -1.0 : percentile(spread->second, 0.5)});
  }
  if (unscored > 0)
    c.warnings.push_back(std::to_string(unscored) + " op(s) with a predicted duration of 0 are not scored");
}

// The ten ops that explain most of the iteration-time difference: those on either critical path by
// |measured - predicted| (a split collective's transfer and wait both), then (if fewer than ten) the other
// ops by the same measure.
void add_top_errors(Comparison& c) {
  std::vector<OpComparison> ranked = c.ops;
  std::stable_sort(ranked.begin(), ranked.end(), [](const OpComparison& a, const OpComparison& b) {
    if (a.on_critical_path != b.on_critical_path) return a.on_critical_path;
    return std::abs(a.delta_us()) + std::abs(a.wait_delta_us()) >
           std::abs(b.delta_us()) + std::abs(b.wait_delta_us());
  });
  if (ranked.size() > 10) ranked.resize(10);
  c.top_error_ops = std::move(ranked);
}

// Traces of two different schedules (another model, shape, TP degree or plan) share many op ids, and their
// op-by-op errors would read as the model's: refused, naming what differs. Traces that predate the
// fingerprint are compared as before.
void check_same_schedule(const TraceFile& predicted, const TraceFile& measured) {
  const auto field = [](const TraceFile& t, const char* key) {
    const auto it = t.meta.find(key);
    return it == t.meta.end() || it->is_null() ? std::string()
           : it->is_string()                   ? it->get<std::string>()
                                               : it->dump();
  };
  const std::string fp_p = field(predicted, "schedule_fingerprint"),
                    fp_m = field(measured, "schedule_fingerprint");
  if (fp_p.empty() || fp_m.empty() || fp_p == fp_m) return;
  std::string differs;
  for (const char* key : {"model", "tp", "seq_len", "micro_batch", "strategy"}) {
    const std::string a = field(predicted, key), b = field(measured, key);
    if (a != b)
      differs += fmt::format("{}{} {} predicted, {} measured", differs.empty() ? "" : "; ", key, a, b);
  }
  throw_bad_input(fmt::format(
      "{} and {} are traces of different schedules ({}): compare a prediction with a "
      "run of the same plan, model and shape",
      predicted.path, measured.path, differs.empty() ? "the same plan name, but their ops differ" : differs));
}

}  // namespace

Comparison compare_traces(const TraceFile& predicted, const TraceFile& measured, const CompareOptions& options) {
  check_same_schedule(predicted, measured);
  RankEvents pr = by_rank(predicted), mr = by_rank(measured);
  Comparison c;
  std::vector<int> p_ranks = pick_ranks(predicted, pr, options.rank, true);
  std::vector<int> m_ranks = pick_ranks(measured, mr, options.rank, false);
  if (options.rank < 0) {
    c.mode = "median across ranks (predicted ranks " + rank_list(pr) + ", measured ranks " + rank_list(mr) + ")";
  } else {
    c.mode = "rank " + std::to_string(options.rank) +
             (p_ranks.front() != options.rank ? " (predicted rank 0 stands for every rank)" : "");
  }
  c.predicted = summarise(predicted, pr, p_ranks, options.rank < 0 ? slowest_rank(pr, p_ranks) : p_ranks.front());
  c.measured = summarise(measured, mr, m_ranks, options.rank < 0 ? slowest_rank(mr, m_ranks) : m_ranks.front());

  // A prediction is one iteration by nature: its spans' own durations.
  auto p_ops = op_stats(predicted, p_ranks, /*one_iteration=*/true);
  auto m_ops = op_stats(measured, m_ranks, options.one_iteration);
  c.measured_durations = measured_durations(measured, options.one_iteration);
  const auto splits = measured_collective_splits(measured, m_ranks, options.one_iteration);
  std::set<std::string> on_path(c.predicted.critical_path.begin(), c.predicted.critical_path.end());
  on_path.insert(c.measured.critical_path.begin(), c.measured.critical_path.end());
  for (const std::string& id : in_trace_order(p_ops)) {
    auto m = m_ops.find(id);
    if (m == m_ops.end()) { c.only_in_predicted.push_back(id); continue; }
    const OpStats& p = p_ops.at(id);
    OpComparison op;
    op.id = id;
    op.kind = p.kind;
    op.phase = p.phase;
    op.predicted_start_us = p.first_start;
    op.predicted_us = percentile(p.durations, 0.5);
    op.measured_us = percentile(m->second.durations, 0.5);
    if (!m->second.p10s.empty() && m->second.p10s.size() == m->second.durations.size()) {
      op.measured_p10_us = percentile(m->second.p10s, 0.5);
      op.measured_p90_us = percentile(m->second.p90s, 0.5);
    }
    if (const auto split = splits.find(id); split != splits.end()) split_collective(p, split->second, op);
    if (op.predicted_us > 0) op.error_pct = std::abs(op.measured_us - op.predicted_us) / op.predicted_us * 100.0;
    op.on_critical_path = on_path.count(id) > 0;
    if (p.kind != m->second.kind)
      c.warnings.push_back(id + ": kind \"" + p.kind + "\" predicted but \"" + m->second.kind + "\" measured");
    c.ops.push_back(std::move(op));
  }
  for (const std::string& id : in_trace_order(m_ops))
    if (!p_ops.count(id)) c.only_in_measured.push_back(id);

  add_error_figures(c);
  add_wait_figures(c, std::any_of(splits.begin(), splits.end(),
                                  [](const auto& split) { return split.second.iterations > 1; }));
  add_top_errors(c);

  if (c.predicted.iteration_us > 0) {
    c.iteration_error_pct = (c.measured.iteration_us - c.predicted.iteration_us) / c.predicted.iteration_us * 100.0;
    double ratio = c.measured.iteration_us / c.predicted.iteration_us;
    if (ratio > 100 || ratio < 0.01)
      c.warnings.push_back("measured and predicted iteration times differ by a factor of " + std::to_string(ratio) +
                           ": is one trace's ts/dur in milliseconds or nanoseconds instead of microseconds?");
  } else {
    c.warnings.push_back("predicted iteration time is 0: iteration error not defined");
  }
  warn_of_late_ranks(measured, c.measured.iteration_us, c.warnings);
  if (c.ops.empty()) c.warnings.push_back("no op id is present in both traces: are these traces of the same model?");
  if (predicted.source == "measured") c.warnings.push_back(predicted.path + " says it is a measured trace (arguments swapped?)");
  if (measured.source == "predicted") c.warnings.push_back(measured.path + " says it is a predicted trace (arguments swapped?)");
  return c;
}

}  // namespace domino
