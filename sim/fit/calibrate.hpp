// calibrate.hpp: fits a profile's parameters to a measured trace (domino-exec --trace), so one real run
// improves every later prediction. Least squares over per-op durations, per op kind: memory-bound ops
// (fixed cost + bandwidth), GEMMs (a time scale per half-decade of FLOPs applied to the table and the
// efficiency curve), attention (the same on its curve), each collective kind (AllReduce, AllGather,
// ReduceScatter: latency + bandwidth scale of its curves, tables kept in shape), the ranks' arrival skew at
// the collectives (sync_us, from the spread of their start times), and the interference slowdowns from ops
// that overlapped the other stream. A scope limits what may change.
#pragma once

#include <string>

#include "sim/cost/profile.hpp"
#include "sim/trace/timeline.hpp"

namespace domino::prof {

struct KindError {
  std::string kind;
  int ops = 0;
  double before = 0, after = 0;  // sum |predicted - measured| / sum measured, over the kind's ops
};

// What a calibration may change; the rest of the profile is kept as it is.
struct CalibrationScope {
  bool memory = true, gemm = true, attention = true, allreduce = true, sync = true, interference = true;
  bool allgather = true, reducescatter = true;  // the sequence-parallel collectives' curves
  // The arrival skew's growth with the compute between collectives (sync_per_compute) beside sync_us. Only
  // when named: fitted on one plan's trace it did not rank the other plans better (docs/profiling.md).
  bool sync_growth = false;
  // sync_us from the trace's iteration time instead of its mean skew: the constant per collective that
  // makes the simulated iteration of a trace whose streams do not overlap (megatron-sync) equal the measured
  // one. Only when named. With sync_growth as well: the growth (sync_per_compute, sync_us 0) that does so.
  bool sync_iteration = false;
  // A collective's delay beside compute (interference.comm_delay_during_compute_us), its slowdown held, from
  // the collectives that ran mostly beside compute. Only when named: it needs a trace whose collectives ran
  // beside compute (an overlapped plan), and a flat profile.
  bool comm_delay = false;
  // The wait of a collective whose turn comes while its rank computes (interference.comm_start_wait_us),
  // from the trace's collectives and their deps. Only when named: it needs a trace whose collectives came due
  // beside compute (an overlapped plan), written with deps, and a flat profile.
  bool comm_start = false;
  // The compute stream's stall share (interference.compute_stall_share): what the measured iteration of a
  // trace without collectives (no-comm) takes beyond its compute ops' costs, after the compute fits. Only
  // when named: it needs such a trace, and a flat profile.
  bool stall = false;
  // The per-row term of memory-bound ops on a column chunk (memory.*.chunk_row_us), from the trace's ops on a
  // column chunk against their opcode's (kind's) figures for whole rows. Only when named: it needs a trace of
  // a plan that splits row-parallel outputs in column chunks, which no-comm's is not; the profiler's cold
  // probes overstate it in training (about 70 against 40 ns per row on one CPU, docs/fidelity.md).
  bool memory_rows = false;
  // The bandwidth of a row block's later column chunks (memory.*.later_chunk_bandwidth_gbps), from the
  // trace's ops on a later chunk: their bytes over their time beyond the fixed cost. Only when named: it
  // needs a trace of a plan with column chunks (in training a later chunk runs faster than the first:
  // docs/fidelity.md).
  bool later_chunks = false;
  // The compute's slowdown beside a collective (interference.compute_slowdown_during_comm) from the trace's
  // iteration time: the slowdown with which the schedule the trace ran, simulated, takes as long as measured
  // (after every other part). Only when named: it needs a trace of an overlapped named strategy (its schedule
  // is rebuilt from the trace's header), and a flat profile.
  bool interference_iteration = false;
  // What training adds to every collective kind of the group's level over the probe, a time per collective
  // and a time per byte a rank moves, from the trace's collectives as they transferred in training (the rank
  // that waited least, the median over the timed iterations). Only when named: it needs a trace of every
  // timed iteration with collectives (megatron-sync).
  bool transfer = false;
  // The AllGather's and the ReduceScatter's own time per collective and per byte over the profile, each kind
  // from its own transfers in the trace (after `transfer`, which gave them the AllReduce's time per byte).
  // Only when named: it needs a trace of every timed iteration with those collectives (megatron-sp-sync).
  bool sp_transfer = false;
  // The compute's slowdown in an iteration whose ranks communicate (interference.compute_slowdown_with_comm),
  // from the compute ops of a trace with collectives none of whose compute ran beside one (megatron-sync)
  // against the profile's costs, fitted on no-comm first. Only when named: it needs such a trace, and a flat
  // profile.
  bool comm_compute = false;
};
// Parses --fit: a comma-separated list of memory, gemm, attention, allreduce, allgather, reducescatter, sync,
// sync_growth, sync_iteration (each implies sync; both: the growth from the iteration), interference,
// comm_delay, comm_start, stall, memory_rows, later_chunks, interference_iteration, transfer, sp_transfer,
// comm_compute, or "all" (every part but sync_growth, sync_iteration, comm_delay, comm_start, stall,
// memory_rows, later_chunks, interference_iteration, transfer, sp_transfer and comm_compute). BadInput on
// anything else.
CalibrationScope parse_calibration_scope(const std::string& list);

struct CalibrationResult {
  Profile profile;
  std::vector<KindError> errors;  // per kind, then "all"
  std::string report;             // human-readable: fitted figures and fit quality
};

// tp: the trace's TP group (0: read from the trace's "domino" header). BadInput when the trace has no op
// events with the executor's args (kind, m, n, k, flops, bytes).
CalibrationResult calibrate_profile(const Profile& base, const TraceFile& trace, int tp = 0,
                                    const CalibrationScope& scope = {});

}  // namespace domino::prof
