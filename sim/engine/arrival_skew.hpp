// arrival_skew.hpp: the ranks' arrival skew at each collective as a function of the schedule. The ranks of
// a TP group run the same compute, but not at the same speed: between two collectives they drift apart by
// an amount that grows with the compute run in between, and the rank that reaches the next collective first
// waits for the other. The profile's constant collectives.<level>.sync_us is the part that does not grow with
// that compute (the cost model adds it to every collective; a collective the ranks reach aligned gets it
// back here); sync_per_compute is the drift per microsecond of compute, which this file turns into a
// per-collective addition.
#pragma once

#include <vector>

#include "sim/ir/schedule.hpp"

namespace domino {

// Per op: for a collective, the standalone compute (microseconds, from `duration`) the compute stream runs
// between the previous collective's launch point and this one's; 0 for every other op. A collective's
// launch point is the position on the compute stream after the last compute op it waits on (through other
// communication ops too); the first collective counts from the start of the iteration, where the ranks
// leave a barrier together. A collective launched no later than the previous one gets 0.
std::vector<double> compute_between_collectives(const Schedule& schedule, const std::vector<double>& duration);

// Per op: whether it is a collective the ranks reach aligned, launched no later than the previous collective
// (its launch point, as above, not past the previous one's): it is queued behind a collective that the ranks
// finished together, with no compute of theirs between to drift apart by (megatron-sp-overlap's AllGather
// chunks, a norm's two gradient AllReduces), or leaves the iteration's barrier at once. Measured on two
// CPU ranks, such collectives started a median 8-27 us apart, those after compute 0.9-2.2 ms
// (docs/fidelity.md). `ops`: a schedule's, or a trace's rebuilt from its events' stream and deps.
std::vector<char> aligned_collectives(const std::vector<Op>& ops);

// A profile's arrival skew at the schedule's level: the constant (which the cost model already put in
// every collective's duration) and its growth with the compute between collectives.
struct ArrivalSkew {
  double sync_us = 0;
  double sync_per_compute = 0;
};

// Per op: the wait for the last rank that a collective's duration carries (the cost model's sync_us plus
// the growth) once with_arrival_waits has applied: 0 for an aligned collective, a collective of duration 0
// (communication off) and every other op. The simulator charges of it only what is left when the collective's
// stream comes to it: the last rank arrives that long after the collective's compute deps end, and a
// collective queued behind another that ends on every rank together may start after that (simulator.cpp).
// domino-compare scores a collective's transfer and the wait charged apart.
std::vector<double> arrival_waits(const Schedule& schedule, const std::vector<double>& duration,
                                  ArrivalSkew skew);

// `duration` with each collective's skew, written into `scratch`, from the waits arrival_waits gave for these
// durations and skew (not read without a skew): the constant sync_us taken back from an aligned collective
// (aligned_collectives), sync_per_compute x compute_between_collectives added to every other. `duration`
// itself (no copy) when the profile has no skew.
const std::vector<double>& with_arrival_waits(const Schedule& schedule, const std::vector<double>& duration,
                                              ArrivalSkew skew, const std::vector<double>& wait,
                                              std::vector<double>& scratch);

}  // namespace domino
