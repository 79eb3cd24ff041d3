// collective_split.hpp: a measured collective split into its transfer and its ranks' arrival wait. On a rank,
// a collective's span runs from that rank's arrival to the end: the first rank to arrive waits for the last
// one, and then all of them transfer together. The wait depends on how far the ranks drifted apart in the
// compute before (on a shared host, which rank runs slower changes from one iteration to the next), the
// transfer on the collective itself; the prediction charges both to the collective's span (the wait as the
// arrival skew, the trace's args.arrival_wait_us), and domino-compare scores them apart.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sim/trace/timeline.hpp"

namespace domino {

struct MeasuredCollectiveSplit {
  // From the last rank's arrival to each rank's end, the median over the ranks: the median over the
  // iterations, and its p10 and p90.
  double transfer_us = 0, transfer_p10_us = 0, transfer_p90_us = 0;
  // The last rank's arrival after the median rank's (what a rank of the median pace waits), the mean over the
  // iterations: an iteration pays every wait, and which rank waits changes from one iteration to the next.
  double wait_us = 0;
  int iterations = 0;
};

// Per collective op id that every one of `ranks` (at least two) ran: its split over the trace's timed
// iterations (domino.iteration_spans) where it has them and `one_iteration` is false, else over the trace's
// one iteration. Empty with fewer than two ranks, and where the ranks read clocks of their own (rank_clocks
// "per-rank").
std::map<std::string, MeasuredCollectiveSplit> measured_collective_splits(const TraceFile& trace,
                                                                          const std::vector<int>& ranks,
                                                                          bool one_iteration);

}  // namespace domino
