// calibrate_terms.hpp: what calibrate_profile shares with its per-term fits: the per-op samples of a
// measured trace and one function per cost term (memory-bound ops, GEMM, attention, each collective kind,
// arrival skew, interference). Each fit reads the samples and updates the calibrated profile and the report.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "sim/cost/cost_model.hpp"
#include "sim/fit/calibrate.hpp"
#include "sim/trace/trace_iterations.hpp"

namespace domino::prof::calibration {

// Spans [start, end) of one stream, and the time they cover within [from, to].
using Intervals = std::vector<std::pair<double, double>>;
double busy_time(const Intervals& busy, double from, double to);

struct Sample {
  Op op;              // kind, shape, flops, bytes, dtype: what the cost model needs
  double dur = 0;     // measured: the slowest rank (it sets the pace at every collective); a collective: the
                      // fastest rank, which waited least for its peers
  double overlap = 0; // time the other stream of the same rank was busy during this op
  double skew = -1;   // a collective on several ranks: the last rank's start minus the median rank's; else -1
  // A collective: the compute-stream busy time between the previous collective's start and its own, the
  // least over the ranks (the late rank's own compute holds the slowness that made it late); else -1.
  double compute_between = -1;
  int index = -1;  // the op's index in its schedule (args.op)
  // A collective the ranks reach aligned (sim/engine/arrival_skew.hpp, from the trace's streams and deps):
  // the simulator charges it no skew, so no skew fit counts it.
  bool aligned = false;
};

// The trace's ops costed as if run one after another (what the simulator's iteration is when the streams do
// not overlap): each op's cost, a compute op's stretched by a stall share; with what the trace overlapped.
struct SerialCost {
  double us = 0;
  int compute_ops = 0;
  double overlapped_us = 0;  // time the trace's ops ran beside the other stream
  int collectives = 0;
  int skewed_collectives = 0;  // those the ranks reach apart, which the simulator charges the skew
};

// The end of the range a fitted interference slowdown may take (the collectives' on their grid, the
// compute's from an iteration time).
inline constexpr double kMaxFittedSlowdown = 9;

// A whole number of the trace (an op index, a GEMM dimension, the TP degree) in [lowest, limit], `what`
// naming it and e its event (null: the header) in the BadInput otherwise: a value out of range would be cast
// to an integer, which C++ leaves undefined.
int64_t whole_number(const TraceFile& trace, const TraceEvent* e, const std::string& what,
                     const nlohmann::json& v, double lowest, double limit);

// The trace read once for every fit. Holds the samples the selections point into: not copyable.
struct TraceSamples {
  const Profile& base;  // the profile being calibrated, as it came in
  int tp = 1;           // the trace's TP group
  int devices_per_node = 1;
  DType dtype = DType::BF16;
  std::vector<Sample> samples;
  bool communicates = false;  // the trace has a collective

  TraceSamples(const Profile& base_profile, const TraceFile& trace, int tp_group);
  TraceSamples(const TraceSamples&) = delete;
  TraceSamples& operator=(const TraceSamples&) = delete;

  // Base-cost samples of the kinds `of_kind` accepts: ops that did not overlap the other stream (or all of
  // them, corrected by the old interference, when too few ran alone).
  std::vector<const Sample*> select(const std::function<bool(OpKind)>& of_kind) const;
  // A sample's duration without the old profile's interference over its measured overlap (a compute op's,
  // in a trace with collectives, without the old compute_slowdown_with_comm either).
  double interference_free(const Sample& s) const;
  // What p stretches this trace's compute ops by beyond their costs and stall: 1 + its
  // compute_slowdown_with_comm where the trace communicates, else 1.
  double compute_stretch(const Profile& p) const;
  // The samples costed by cm one after another, compute ops stretched by compute_stall and compute_stretch,
  // each then held stall_per_op_us longer.
  SerialCost serial_cost(const CostModel& cm, double compute_stall, double stall_per_op_us) const;
};

// The terms, in the order calibrate_profile applies them (a later one fits against the earlier results).
void fit_memory_general(const TraceSamples& in, Profile& p, std::string& report);
void fit_memory_per_kind(const TraceSamples& in, Profile& p, std::string& report);
void fit_memory_per_code(const TraceSamples& in, Profile& p, std::string& report);
// memory.*.chunk_row_us of each opcode and kind with figures of its own and ops on a column chunk in the
// trace.
void fit_memory_rows(const TraceSamples& in, Profile& p, std::string& report);
// memory.*.later_chunk_bandwidth_gbps of each opcode and kind with figures of its own and ops on a later
// column chunk in the trace.
void fit_later_chunks(const TraceSamples& in, Profile& p, std::string& report);
// GEMM and attention scale against `cm`: the costs after the memory fit, before either of them.
void fit_gemm_scales(const TraceSamples& in, const CostModel& cm, Profile& p, std::string& report);
// interference.compute_slowdown_with_comm from a trace with collectives (megatron-sync): its compute ops'
// measured time over their costs in `p` (fitted on no-comm), less one, within [0, kMaxCommComputeSlowdown].
// BadInput on a trace without collectives.
void fit_compute_with_comm(const TraceSamples& in, Profile& p, std::string& report);
void fit_attention_scales(const TraceSamples& in, const CostModel& cm, Profile& p, std::string& report);
// A collective kind's curves (AllReduce, AllGather, ReduceScatter); nothing when the trace has none of it.
void fit_collective(const TraceSamples& in, OpKind kind, Profile& p, std::string& report);
// growth: sync_us + sync_per_compute by least squares (the mean alone where the growth is noise); else the
// mean skew as sync_us and sync_per_compute 0.
// Without growth, where `iterations` (every_iteration's, of ranks on one clock) hold at least five, sync_us
// is the median over them of each one's mean skew, else the traced iteration's mean.
void fit_arrival_skew(const TraceSamples& in, const std::vector<std::vector<TraceEvent>>& iterations,
                      bool growth, Profile& p, std::string& report);
// The constant sync_us with which the trace's ops, costed by p, add up to iteration_us (a trace whose streams
// do not overlap: the simulator's iteration is then the sum of its ops' costs). BadInput when the trace has
// no collective or its streams overlap.
void fit_skew_to_iteration(const TraceSamples& in, double iteration_us, bool growth, Profile& p,
                           std::string& report);
// The trace's measured iteration time: the mean of domino.iteration_samples_us (one per timed iteration)
// where the trace has them, else domino.iteration_time_us (the median); BadInput naming the --fit part when
// the trace has neither, or a sample that is not a time.
double measured_iteration_us(const TraceFile& trace, const std::string& part);
// The compute stream's gap between consecutive compute ops as the trace measured it (the next one's start
// less the previous one's end), per pair of ops: the mean over every timed iteration and rank where the trace
// has them (domino.iteration_spans), else over its one traced iteration's ranks. -1 without two compute ops,
// and for a predicted trace (its gaps are the model's stall, not a measurement).
double compute_gap_per_op(const TraceFile& trace);
// The compute stream's stall (a trace without collectives: no-comm): a time per compute op, the measured gap
// per op (compute_gap_per_op; negative: none measured), and a share of the compute ops' costs by p with which
// they and those gaps add up to iteration_us. Where the costs and gaps alone exceed it, the share is 0 and
// the time per op what is left. BadInput when the trace has a collective.
void fit_compute_stall(const TraceSamples& in, double iteration_us, double gap_per_op_us, Profile& p,
                       std::string& report);
void fit_interference(const TraceSamples& in, Profile& p, std::string& report);
// The collectives' delay beside compute, from those that ran mostly beside it: in every timed iteration
// (`iterations`, every_iteration's) where the trace has them, else in its one.
void fit_comm_delay(const TraceSamples& in, const std::vector<std::vector<TraceEvent>>& iterations,
                    Profile& p, std::string& report);
// The schedule a measured trace ran, rebuilt from its header (model, named strategy, TP degree, shape,
// optimizer) and checked against its schedule_fingerprint; BadInput naming what is missing or differs.
Schedule schedule_of_trace(const TraceFile& trace);
// The compute's slowdown beside a collective (interference.compute_slowdown_during_comm, 0 to 9) with which
// the schedule, simulated with p, takes iteration_us (calibrate_overlap_iteration.cpp).
void fit_compute_slowdown_to_iteration(const Schedule& schedule, double iteration_us, Profile& p,
                                       std::string& report);
// The wait of a collective whose turn comes while its rank computes, from the trace's spans and deps
// (calibrate_comm_start.cpp), pooled over `iterations` (every_iteration's) where the trace has them; nothing
// changes when too few collectives came due beside compute.
void fit_comm_start(const TraceFile& trace, const std::vector<std::vector<TraceEvent>>& iterations,
                    Profile& p, std::string& report);

// A collective in one iteration: the duration of the rank that took least, and how long that rank's compute
// stream was busy beside it.
struct CollectiveRun {
  double dur = 0, overlap = 0;
};
// What training adds to every collective kind of the group's level over the probe: a time per collective
// and per byte a rank moves (calibrate_transfer.cpp).
void fit_transfer_terms(const TraceSamples& in, const std::vector<std::vector<TraceEvent>>& iterations,
                        Profile& p, std::string& report);
// The AllGather's and the ReduceScatter's own time per collective and per byte over the profile, each from
// its own transfers in the trace, added to that kind's curves alone (calibrate_transfer.cpp).
void fit_sp_transfer_terms(const TraceSamples& in, const std::vector<std::vector<TraceEvent>>& iterations,
                           Profile& p, std::string& report);
// A level's curves of one collective kind as one value (the AllReduce's live in the level's own fields);
// nullopt when the level has none for the kind. set_kind_curves writes them back.
std::optional<AlgorithmCurves> kind_curves(const CollectiveProfile& c, OpKind kind);
void set_kind_curves(CollectiveProfile& c, OpKind kind, const AlgorithmCurves& k);
// A curve's bus bandwidth, its table's rows alike, over `divisor` (> 1: a slower link).
void divide_bus_bandwidth(CollectiveCurve& curve, double divisor);
// Per collective op index, its run in each of `iterations`.
std::map<int, std::vector<CollectiveRun>> collective_runs(
    const std::vector<std::vector<TraceEvent>>& iterations);

// The collective figures a TP group of tp ranks uses: inter-node when it spans nodes and the profile has them
// (as CostModel::collective_cost chooses).
template <typename P>
auto& group_collective(P& profile, int tp) {
  return tp > profile.devices_per_node && profile.inter_node ? *profile.inter_node : profile.intra_node;
}

}  // namespace domino::prof::calibration
