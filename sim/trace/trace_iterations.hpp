// trace_iterations.hpp: every timed iteration of a measured trace that carries them (domino.iteration_spans,
// domino-exec --trace-iterations), as events: for the figures that one iteration holds too few samples of
// (the calibration's fits, a collective's arrival wait in domino-compare).
#pragma once

#include <vector>

#include "sim/trace/timeline.hpp"

namespace domino {

// The trace's events moved to each timed iteration's spans: an event per span, its op's kind, stream, shape
// and deps those of the trace's event of the same rank and op. Empty when the trace has none; BadInput naming
// the trace when they are malformed or name a rank and op its events lack.
std::vector<std::vector<TraceEvent>> every_iteration(const TraceFile& trace);

// Whether the trace's ranks read one clock, so that their times compare across ranks (who arrived first):
// all but a trace that says "per-rank" (domino.rank_clocks; ranks on several hosts).
bool ranks_share_a_clock(const TraceFile& trace);

}  // namespace domino
