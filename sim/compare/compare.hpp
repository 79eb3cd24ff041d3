// compare.hpp: predicted vs measured traces (domino-compare): op alignment, error figures, exposed
// communication, critical paths, and the merged Chrome trace. See docs/compare.md for the definitions.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "sim/base/percentile.hpp"
#include "sim/trace/timeline.hpp"

namespace domino {

struct CompareOptions {
  // -1: per op, the median duration across the ranks of each side (predicted traces often hold rank 0
  // only: ranks are symmetric). R >= 0: predicted rank R (rank 0 when the prediction has rank 0 only)
  // against measured rank R.
  int rank = -1;
  // Measured traces of domino-exec carry each op's duration over every timed iteration: by default an op
  // is judged on its median there. true: on the duration in the trace's one iteration instead.
  bool one_iteration = false;
};

// One op id present on both sides.
struct OpComparison {
  std::string id;
  std::string kind;
  std::string phase;              // the trace's args.phase (fwd, bwd, ...); empty when absent
  double predicted_start_us = 0;  // orders ops in reports
  double predicted_us = 0;
  double measured_us = 0;
  // The measured op's p10..p90 over the iterations (median over the ranks); -1 when the trace has none.
  double measured_p10_us = -1, measured_p90_us = -1;
  double delta_us() const { return measured_us - predicted_us; }
  // A split collective's wait, measured - predicted; 0 when not split.
  double wait_delta_us() const { return predicted_wait_us < 0 ? 0 : measured_wait_us - predicted_wait_us; }
  // Half the p10..p90 width over the measured duration, in %: how far one iteration strays; -1 if unknown.
  double spread_pct() const {
    return measured_p10_us < 0 || measured_us <= 0 ? -1 : (measured_p90_us - measured_p10_us) / (2 * measured_us) * 100;
  }
  // A collective measured on two ranks or more whose prediction recorded its arrival wait: predicted_us and
  // measured_us (and p10..p90) are its transfer, and these its wait for the last rank (collective_split.hpp).
  // -1: not split.
  double predicted_wait_us = -1, measured_wait_us = -1;
  // |measured - predicted| / predicted * 100; negative when the prediction is 0 (not scored).
  double error_pct = -1;
  bool on_critical_path = false;  // on the predicted or the measured critical path
};

// The by_kind row of the collectives' arrival waits (OpComparison::predicted_wait_us > 0).
inline constexpr const char* kArrivalWaitKind = "arrival wait";

struct KindError {
  std::string kind;
  double median_pct = 0;
  double p90_pct = 0;
  int count = 0;  // scored ops of this kind
  double spread_pct = -1;  // median over these ops of OpComparison::spread_pct(); -1 when unknown
};

// The split collectives' arrival waits of one phase of the iteration (OpComparison::phase), the mean per
// collective of each side: where the ranks drift apart over a pass whose collectives make no compute wait,
// the backward's waits grow far past the forward's, which one median error per op does not show.
struct PhaseWaits {
  std::string phase;  // "unnamed" for ops without args.phase
  int count = 0;      // split collectives, predicted aligned ones (wait 0) included
  double predicted_mean_us = 0, measured_mean_us = 0;
};

// Figures of one side (predicted or measured).
struct SideSummary {
  std::string path;
  std::string source;
  std::vector<int> ranks;          // ranks analysed
  double iteration_us = 0;
  // "samples" (the mean of the trace's domino.iteration_samples_us, its timed iterations), "meta" (its
  // domino.iteration_time_us) or "spans"
  std::string iteration_from;
  double comm_busy_us = 0;         // union of communication spans (median over ranks)
  double exposed_comm_us = 0;      // communication while compute is idle (median over ranks)
  double overlap_fraction = 0;     // 1 - exposed / comm busy; 0 without communication
  int critical_rank = 0;           // the rank the critical path was walked on
  std::vector<std::string> critical_path;  // ids, first op first
};

struct Comparison {
  std::string mode;  // "median across ranks" or "rank R"
  SideSummary predicted, measured;
  double iteration_error_pct = 0;  // signed: (measured - predicted) / predicted * 100
  double op_error_median_pct = 0;
  double op_error_p90_pct = 0;
  double op_spread_median_pct = -1;  // median over the scored ops of spread_pct(); -1 when unknown
  std::string measured_durations;     // what an op's measured duration is (the median over N iterations, ...)
  int scored_ops = 0;
  std::vector<KindError> by_kind;  // sorted by kind name, then the arrival waits' row
  std::vector<PhaseWaits> waits_by_phase;  // sorted by phase name; empty when no collective was split
  std::vector<OpComparison> ops;   // aligned ops, in predicted start order
  std::vector<std::string> only_in_predicted, only_in_measured;  // in trace order
  std::vector<OpComparison> top_error_ops;  // at most ten, see compare.cpp
  std::vector<std::string> warnings;
};

Comparison compare_traces(const TraceFile& predicted, const TraceFile& measured,
                          const CompareOptions& options = {});

nlohmann::json comparison_json(const Comparison& c);  // the --json document (stable keys)
std::string comparison_table(const Comparison& c);    // the compact text printed by domino-compare

// One Chrome trace holding both sides: rank R predicted is process 2R, rank R measured is 2R+1, named
// "rank R (predicted)" / "rank R (measured)" and sorted so that Perfetto shows them one above the other.
nlohmann::json merged_trace_json(const TraceFile& predicted, const TraceFile& measured);

// ---- span analysis (compare_spans.cpp), on the events of one rank ----

struct StreamUsage {
  double compute_busy_us = 0;  // union of compute spans
  double comm_busy_us = 0;     // union of communication spans
  double exposed_comm_us = 0;  // communication time not covered by any compute span
  double overlap_fraction() const { return comm_busy_us > 0 ? 1.0 - exposed_comm_us / comm_busy_us : 0.0; }
};
StreamUsage stream_usage(const std::vector<const TraceEvent*>& rank_events);

// Critical path of one rank, first op first. Deps are not in traces, so they are inferred: walking back
// from the last op to finish, an op's predecessor is whichever finished last among the previous op on
// its stream and the ops of the other stream that finished no later than it started.
std::vector<const TraceEvent*> critical_path(const std::vector<const TraceEvent*>& rank_events);

}  // namespace domino
