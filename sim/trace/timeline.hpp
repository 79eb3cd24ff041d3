// timeline.hpp: when each op of a schedule ran (predicted or measured), and the Chrome-trace files
// both the simulator and the executor write with the same schema (docs/trace-format.md).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "sim/ir/schedule.hpp"

namespace domino {

// No op, iteration or trace time beyond this (1e12 us, 11.6 days) belongs to a training step: the simulator
// refuses a cost that large (a profile figure off by orders of magnitude) and the trace reader such a time,
// rather than print a number of hundreds of digits.
inline constexpr double kMaxTimeUs = 1e12;

// A measured op's duration over every timed iteration of its rank (samples = 0: not known, e.g. predicted).
// One iteration's duration carries that iteration's noise; the median over the iterations is what a model
// can be judged on, and p10..p90 says how far one iteration strays. The mean is what an iteration pays on
// average: a collective that stalls for milliseconds in a few iterations keeps its median and raises its
// mean. The typical mean is the op's mean over the typical iterations, the middle half of the run's by
// iteration time (a quarter left out at either end; all of them below four): what the median iteration pays
// for it. An op stalled for milliseconds in the one iteration a page fault or another process slowed no
// longer counts that stall, while stalls spread over many ops and iterations still do. mean_us,
// typical_mean_us < 0: not recorded (traces written before).
struct DurationSpread {
  int32_t samples = 0;
  double p10_us = 0, median_us = 0, p90_us = 0;
  double mean_us = -1;
  double typical_mean_us = -1;
  bool has_mean() const { return samples > 0 && mean_us >= 0; }
  bool has_typical_mean() const { return samples > 0 && typical_mean_us >= 0; }
};

struct OpSpan {
  int32_t op = 0;  // index into Schedule::ops
  int32_t rank = 0;
  double start_us = 0;  // from the start of the iteration
  double end_us = 0;
  DurationSpread spread;  // measured: over the timed iterations
  // Predicted collectives: the part of the span that is the wait for the last rank to arrive (the arrival
  // skew the model charged it; 0 where the ranks arrive together). -1: not a predicted collective.
  double arrival_wait_us = -1;
};

struct Timeline {
  std::string source;  // "predicted" or "measured"
  int32_t ranks = 1;
  std::vector<OpSpan> spans;  // one per (op, rank) that ran
  double iteration_us = 0;    // predicted time, or the measured median
  std::vector<double> iteration_samples_us;  // measured: one per timed iteration
  std::vector<int64_t> peak_memory_bytes;    // per rank
  // Measured: per rank, how long after the earliest rank it started the iteration shown, when the ranks read
  // one clock; the spans are then on that clock (a rank that left the barrier late starts late). Empty when
  // they do not (ranks on several hosts): each rank's spans then count from its own start.
  std::vector<double> rank_start_offsets_us;
  // Measured, when asked for (domino-exec --trace-iterations): every timed iteration's spans, on one clock
  // as `spans` are (without their spread): what calibration pools where one iteration holds few samples.
  std::vector<std::vector<OpSpan>> iteration_spans;
};

// What the schedule is, independent of how its ops were timed or stored (domino.schedule_fingerprint): each
// op's id, kind, opcode, stream, shape and deps. Two traces of one plan of one model at one shape carry the
// same value, whichever tool wrote them; FNV-1a, 64 bits, in hex.
std::string schedule_fingerprint(const Schedule& schedule);

// Trace schema, one complete event ("ph":"X") per span: name = op id, cat = op kind, pid = rank,
// tid = stream (0 compute, 1 comm), ts/dur in microseconds, args = {op, layer, phase, block, slice,
// chunk, code, dtype, m, n, k, flops, bytes; reduce for AllReduce and ReduceScatter; deps (the ops of the
// other stream it waits for, by index) where it has any; for a measured span with its spread over the
// iterations: dur_iterations, dur_p10, dur_median, dur_p90, dur_mean, dur_typical_mean}. Flow events tie each
// collective to the first op that waits on it. Top level: "traceEvents", "displayTimeUnit", and "domino":
// {source, model, plan strategy, tp, iteration_time_us, iteration_samples_us, peak_memory_bytes, plus
// `meta`}; with Timeline::iteration_spans, also iteration_spans: per timed iteration, [rank, op, start_us,
// end_us] per span.
void write_trace(const std::string& path, const Schedule& schedule, const Timeline& timeline,
                 const nlohmann::json& meta = nlohmann::json::object());
nlohmann::json trace_json(const Schedule& schedule, const Timeline& timeline,
                          const nlohmann::json& meta = nlohmann::json::object());

// A trace read back (no schedule needed): what domino-compare works on.
struct TraceEvent {
  std::string id;
  std::string kind;
  int32_t rank = 0;
  int32_t stream = 0;
  double start_us = 0, dur_us = 0;
  double flops = 0, bytes = 0;
  DurationSpread spread;  // from args.dur_*; samples = 0 when the trace has none
  double arrival_wait_us = -1;  // from args.arrival_wait_us (predicted collectives); -1 when absent
  // The duration to judge a model on: the median over the iterations where known, else this iteration's.
  double typical_dur_us() const { return spread.samples > 0 ? spread.median_us : dur_us; }
  nlohmann::json args;
};
struct TraceFile {
  std::string path;
  std::string source;
  std::vector<TraceEvent> events;
  nlohmann::json meta;  // the "domino" object
  std::vector<nlohmann::json> other_events;  // flow, counter, ... events (not "X", not "M"), for merging
};
TraceFile read_trace(const std::string& path);
// The same for a file's content already in memory; `path` names it in messages.
TraceFile read_trace_string(const std::string& text, const std::string& path);
// The trace's mean measured iteration: the mean of domino.iteration_samples_us (one per timed iteration;
// training's throughput is tokens per mean iteration); 0 when the trace lists none (a prediction, an older
// trace). BadInput naming the trace when the list is not an array of times.
double mean_iteration_us(const TraceFile& trace);

}  // namespace domino
