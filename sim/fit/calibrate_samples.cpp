// calibrate_samples.cpp: the per-op samples of a measured trace (see calibrate_terms.hpp): one sample per
// op index, the median over the ranks (as domino-compare scores it; the fastest rank for a collective, which
// waited least for the others), with its overlap with the other stream.
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <optional>

#include "sim/base/error.hpp"
#include "sim/base/whole_number.hpp"
#include "sim/engine/arrival_skew.hpp"
#include "sim/fit/calibrate_terms.hpp"
#include "sim/fit/stats.hpp"
#include "sim/ir/gemm_blocks.hpp"

namespace domino::prof::calibration {

int64_t whole_number(const TraceFile& trace, const TraceEvent* e, const std::string& what, const nlohmann::json& v,
                     double lowest, double limit) {
  const double d = v.is_number() ? v.get<double>() : NAN;
  if (!is_whole_in_range(d, lowest, limit))
    throw_bad_input(trace.path + ": " + (e ? "op " + e->id + " (rank " + std::to_string(e->rank) + "): " : "") +
                    what + " must be a whole number from " + fmt::format("{} to {}", lowest, limit) + ", got " +
                    (v.is_number() ? fmt::format("{}", d) : std::string(v.type_name())));
  return int64_t(d);
}

double busy_time(const Intervals& busy, double from, double to) {
  double t = 0;
  for (const auto& [s, e] : busy) t += std::max(0.0, std::min(e, to) - std::max(s, from));
  return t;
}

namespace {

// A whole-number arg in [lowest, highest], `absent` where the trace does not give it.
int64_t whole_arg(const TraceFile& trace, const TraceEvent& e, const char* key, int64_t absent, double lowest,
                  double highest) {
  if (!e.args.contains(key) || !e.args[key].is_number()) return absent;
  return whole_number(trace, &e, std::string("args.") + key, e.args[key], lowest, highest);
}

// GEMM dimensions: 0 when absent (ops without a shape), below 2^53 so that every one is exact in a double.
int64_t arg_dimension(const TraceFile& trace, const TraceEvent& e, const char* key) {
  return whole_arg(trace, e, key, 0, 0, kMaxExactWholeDouble);
}

// The dtype the trace's ops computed in: as its events name it (args.dtype), else the profile's only GEMM
// dtype, else the dtype of the model the trace names; a trace that says none of these is refused rather than
// costed in a guessed dtype (fp32 figures for fp16 GEMMs are 5-15 times too slow on a GPU).
DType trace_dtype(const Profile& base, const TraceFile& trace) {
  std::optional<DType> named;
  for (const TraceEvent& e : trace.events) {
    const auto it = e.args.find("dtype");
    if (it == e.args.end()) continue;
    std::optional<DType> d;
    for (DType c : {DType::BF16, DType::FP16, DType::FP32})
      if (it->is_string() && it->get<std::string>() == to_string(c)) d = c;
    if (!d) throw_bad_input(trace.path + ": op " + e.id + ": args.dtype must be bf16, fp16 or fp32");
    if (named && *named != *d)
      throw_bad_input(trace.path + ": ops in " + to_string(*named) + " and in " + to_string(*d) +
                      ": calibrate on the trace of one dtype");
    named = d;
  }
  if (named) return *named;
  int present = 0;
  DType only = DType::BF16;
  for (int d = 0; d < kNumDTypes; ++d)
    if (base.gemm[d]) {
      ++present;
      only = DType(d);
    }
  if (present == 1) return only;
  const std::string model = trace.meta.contains("model") && trace.meta["model"].is_string()
                                ? trace.meta["model"].get<std::string>()
                                : std::string();
  try {
    if (!model.empty()) return load_model(model).dtype;
  } catch (const Error&) {
  }
  throw_bad_input(
      trace.path + ": its ops do not name their dtype (a trace written before they did) and its model '" +
      model + "' cannot be loaded by name, while profile '" + base.name + "' has GEMM figures for " +
      std::to_string(present) + " dtypes: re-run the trace, or calibrate a profile of one dtype");
}

// Every event of one op index, across ranks.
struct PerOp {
  Op op;
  std::vector<std::pair<double, double>> dur_overlap;
  struct RankSpan {
    int rank;
    double start_us, end_us;  // on the rank's own clock
  };
  std::vector<RankSpan> spans;
};

// The opcode a trace event names (args.code): GEMM table rows and memory.per_code figures are per opcode.
// An event without one (older traces) keeps the Op's default.
void read_code(const TraceEvent& e, Op& op) {
  const auto it = e.args.find("code");
  if (it == e.args.end() || !it->is_string()) return;
  for (int c = 0; c <= int(OpCode::ReduceScatter); ++c)
    if (*it == to_string(OpCode(c))) op.code = OpCode(c);
}

// The ops on the other stream the event's op waits for (args.deps; none in older traces).
void read_deps(const TraceFile& trace, const TraceEvent& e, Op& op) {
  const auto it = e.args.find("deps");
  if (it == e.args.end()) return;
  if (!it->is_array())
    throw_bad_input(trace.path + ": op " + e.id + ": args.deps is not a list of op indices");
  op.deps.clear();
  for (const auto& d : *it) op.deps.push_back(int32_t(whole_number(trace, &e, "args.deps", d, 0, INT_MAX)));
}

// Per op index: whether the trace's schedule launches it as a collective the ranks reach aligned
// (aligned_collectives), from the ops' streams and deps, in index order (the ops the trace lacks, and deps
// on them, left out). A trace without deps (written before they were, or by hand) cannot tell: none is.
std::map<int, bool> aligned_by_index(const std::map<int, PerOp>& ops) {
  std::map<int, bool> out;
  for (const auto& [index, po] : ops) out[index] = false;
  const bool has_deps =
      std::any_of(ops.begin(), ops.end(), [](const auto& entry) { return !entry.second.op.deps.empty(); });
  if (!has_deps) return out;
  std::map<int, int32_t> position;  // op index -> its place in the compact schedule
  std::vector<Op> schedule;
  for (const auto& [index, po] : ops) {
    position[index] = int32_t(schedule.size());
    schedule.push_back(po.op);
  }
  for (Op& op : schedule) {
    std::vector<int32_t> deps;
    for (int32_t d : op.deps)
      if (const auto it = position.find(d); it != position.end()) deps.push_back(it->second);
    op.deps = std::move(deps);
  }
  const std::vector<char> aligned = aligned_collectives(schedule);
  for (const auto& [index, at] : position) out[index] = aligned[size_t(at)] != 0;
  return out;
}

void add_event(const TraceFile& trace, PerOp& po, OpKind kind, const TraceEvent& e, DType dtype,
               const Intervals& other_stream) {
  po.op.kind = kind;
  po.op.stream = e.stream == int(Stream::Comm) ? Stream::Comm : Stream::Compute;
  read_deps(trace, e, po.op);
  read_code(e, po.op);
  po.op.m = arg_dimension(trace, e, "m");
  po.op.n = arg_dimension(trace, e, "n");
  po.op.k = arg_dimension(trace, e, "k");
  po.op.chunk = int8_t(whole_arg(trace, e, "chunk", -1, -1, 127));  // -1: whole rows
  if (po.op.chunk >= 0 && memory_bound(kind))
    po.op.attrs.chunks = int16_t(whole_arg(trace, e, "chunks", 0, 1, 127));  // 0: not given
  if (kind == OpKind::Gemm) {  // the products it runs as (gemm_blocks.hpp)
    po.op.attrs.row_blocks = int32_t(whole_arg(trace, e, "row_blocks", 1, 1, 1 << 20));
    const int64_t rows = gemm_block_rows(po.op);
    if (rows % po.op.attrs.row_blocks != 0)
      throw_bad_input(trace.path + ": op " + e.id + " (rank " + std::to_string(e.rank) + "): its " +
                      std::to_string(rows) + " rows do not split into args.row_blocks " +
                      std::to_string(po.op.attrs.row_blocks) + " blocks");
  }
  po.op.flops = e.flops;
  po.op.bytes = e.bytes;
  po.op.dtype = dtype;
  // What the median iteration pays for the op, not this iteration's noise nor its typical (median) time: an
  // op preempted for a millisecond in some iterations keeps its median, and an iteration of hundreds of ops
  // pays such stalls on some of them. A compute op's duration is its mean over the typical iterations (the
  // middle half by time) where the trace has it: a stall of 27 ms in the one iteration a page fault slowed
  // had raised an optimizer op's mean over twenty iterations 8.4 times above its median, and the optimizer's
  // fitted bandwidth with it. Else its mean over every iteration, else its median (older traces), else this
  // iteration's. A collective's stays this iteration's, since which rank waits changes from one iteration to
  // the next and the overlap and the skew are this iteration's; to it the collective adds its tail, the
  // typical (else the whole) mean minus the median, where the trace has it.
  const double tail = e.spread.has_typical_mean()
                          ? std::max(0.0, e.spread.typical_mean_us - e.spread.median_us)
                      : e.spread.has_mean() ? std::max(0.0, e.spread.mean_us - e.spread.median_us)
                                            : 0;
  const double dur = collective(kind)              ? e.dur_us + tail
                     : e.spread.has_typical_mean() ? e.spread.typical_mean_us
                     : e.spread.has_mean()         ? e.spread.mean_us
                                                   : e.typical_dur_us();
  po.dur_overlap.push_back({dur, busy_time(other_stream, e.start_us, e.start_us + e.dur_us)});
  po.spans.push_back({e.rank, e.start_us, e.start_us + e.dur_us});
}

// Per rank, what to subtract from its times to put them on the lowest rank's clock: each rank times its
// iteration from the moment it leaves the barrier before it, and one rank may leave it milliseconds after
// another (seen: 10 ms at 2 Gbit/s), which on the ranks' own clocks looks like a late arrival at every
// collective of the iteration. A collective ends on every rank at once (within one message's latency), so the
// median over the collectives of a rank's end minus the lowest rank's is that rank's offset. Empty when the
// trace has fewer than two ranks' collectives. domino-exec writes ranks of one host on one clock already
// (offsets near 0); ranks on several hosts, and traces written before, keep their own clocks.
std::map<int, double> clock_offsets(const std::map<int, PerOp>& ops) {
  int lowest = INT_MAX;
  for (const auto& [index, po] : ops)
    if (collective(po.op.kind))
      for (const PerOp::RankSpan& s : po.spans) lowest = std::min(lowest, s.rank);
  std::map<int, std::vector<double>> differences;  // rank -> its end minus the lowest rank's, per collective
  for (const auto& [index, po] : ops) {
    if (!collective(po.op.kind)) continue;
    const auto reference = std::find_if(po.spans.begin(), po.spans.end(),
                                        [lowest](const PerOp::RankSpan& s) { return s.rank == lowest; });
    if (reference == po.spans.end()) continue;
    for (const PerOp::RankSpan& s : po.spans) differences[s.rank].push_back(s.end_us - reference->end_us);
  }
  std::map<int, double> out;
  if (differences.size() < 2) return out;
  for (auto& [rank, d] : differences) out[rank] = median_of(std::move(d));
  return out;
}

// The ranks' starts of one collective on the lowest rank's clock: what the last rank's wait is measured on.
std::vector<double> aligned_starts(const std::vector<PerOp::RankSpan>& spans,
                                   const std::map<int, double>& offset) {
  std::vector<double> out;
  for (const PerOp::RankSpan& s : spans) {
    const auto it = offset.find(s.rank);
    out.push_back(s.start_us - (it == offset.end() ? 0 : it->second));
  }
  return out;
}

// A collective's duration on the rank that arrived last: the transfer alone, without waiting for a peer.
std::pair<double, double> fastest(const std::vector<std::pair<double, double>>& dur_overlap) {
  return *std::min_element(dur_overlap.begin(), dur_overlap.end());
}

// A compute op's median duration and median overlap over the ranks. The ranks' difference is the arrival
// skew's to model; taking the slowest rank's durations would count it twice.
std::pair<double, double> median_over_ranks(const std::vector<std::pair<double, double>>& dur_overlap) {
  std::vector<double> dur, overlap;
  for (const auto& [d, o] : dur_overlap) {
    dur.push_back(d);
    overlap.push_back(o);
  }
  return {median_of(std::move(dur)), median_of(std::move(overlap))};
}

// Per collective op index: Sample::compute_between. Each rank's collectives in the order they started
// (the communication stream runs them in program order); the first counts from the iteration's start.
std::map<int, double> compute_between_collectives(const TraceFile& trace,
                                                  const std::map<std::pair<int, int>, Intervals>& busy) {
  std::map<int, std::vector<std::pair<double, int>>> starts;  // rank -> (start, op index)
  for (const TraceEvent& e : trace.events) {
    const auto kind = kinds_by_name().find(e.kind);
    if (kind == kinds_by_name().end() || !collective(kind->second) || !e.args.contains("op")) continue;
    starts[e.rank].push_back({e.start_us, int(whole_number(trace, &e, "args.op", e.args["op"], 0, INT_MAX))});
  }
  std::map<int, double> out;
  for (auto& [rank, v] : starts) {
    std::sort(v.begin(), v.end());
    const auto compute = busy.find({rank, int(Stream::Compute)});
    double previous = 0;
    for (const auto& [start, index] : v) {
      const double c = compute == busy.end() ? 0 : busy_time(compute->second, previous, start);
      const auto [at, fresh] = out.emplace(index, c);
      if (!fresh) at->second = std::min(at->second, c);
      previous = start;
    }
  }
  return out;
}

// Traces written before args.chunks: a row block's memory-bound ops on column chunks are emitted one after
// another (chunk 0, 1, ...), so the run of ops that follows a chunk 0 with the next chunk numbers gives its
// chunk count.
void infer_chunk_counts(std::map<int, PerOp>& ops) {
  for (auto it = ops.begin(); it != ops.end(); ++it) {
    Op& first = it->second.op;
    if (first.chunk != 0 || first.attrs.chunks > 0 || !memory_bound(first.kind)) continue;
    int16_t q = 1;
    for (auto next = std::next(it); next != ops.end() && next->first == it->first + q &&
                                    next->second.op.chunk == q && next->second.op.code == first.code;
         ++next)
      ++q;
    first.attrs.chunks = q;
  }
}

std::vector<Sample> collect(const TraceFile& trace, DType dtype) {
  // Busy intervals per (rank, stream), for the overlap of each event with the other stream.
  std::map<std::pair<int, int>, Intervals> busy;
  for (const TraceEvent& e : trace.events) busy[{e.rank, e.stream}].push_back({e.start_us, e.start_us + e.dur_us});
  const std::map<int, double> between = compute_between_collectives(trace, busy);
  std::map<int, PerOp> ops;
  for (const TraceEvent& e : trace.events) {
    const auto kind = kinds_by_name().find(e.kind);
    if (kind == kinds_by_name().end() || !e.args.contains("op")) continue;
    const int64_t index = whole_number(trace, &e, "args.op", e.args["op"], 0, INT_MAX);
    add_event(trace, ops[int(index)], kind->second, e, dtype, busy[{e.rank, 1 - e.stream}]);
  }
  infer_chunk_counts(ops);
  const std::map<int, double> offset = clock_offsets(ops);
  const std::map<int, bool> aligned = aligned_by_index(ops);
  std::vector<Sample> out;
  for (auto& [index, po] : ops) {
    const bool comm = collective(po.op.kind);
    const std::pair<double, double> pick = comm ? fastest(po.dur_overlap) : median_over_ranks(po.dur_overlap);
    const double skew = comm && po.spans.size() > 1 ? wait_for_last(aligned_starts(po.spans, offset)) : -1;
    const auto compute = between.find(index);
    const double compute_between = comm && compute != between.end() ? compute->second : -1;
    if (pick.first > 0)
      out.push_back({po.op, pick.first, pick.second, skew, compute_between, index, aligned.at(index)});
  }
  return out;
}

int trace_tp(const TraceFile& trace, int tp) {
  if (tp > 0) return tp;
  if (!trace.meta.contains("tp")) return 1;
  return int(whole_number(trace, nullptr, "domino.tp", trace.meta["tp"], 1, 1'000'000));
}

}  // namespace

TraceSamples::TraceSamples(const Profile& base_profile, const TraceFile& trace, int tp_group)
    : base(base_profile),
      tp(trace_tp(trace, tp_group)),
      devices_per_node(base_profile.devices_per_node),
      dtype(trace_dtype(base_profile, trace)),
      samples(collect(trace, dtype)) {
  if (samples.empty())
    throw_bad_input(trace.path + ": no op events with the executor's args (op, m, n, k, flops, bytes): not a "
                                 "domino trace?");
  communicates = std::ranges::any_of(samples, [](const Sample& s) { return collective(s.op.kind); });
}

double TraceSamples::compute_stretch(const Profile& p) const {
  return communicates ? 1 + p.interference.compute_slowdown_with_comm : 1.0;
}

std::vector<const Sample*> TraceSamples::select(const std::function<bool(OpKind)>& of_kind) const {
  std::vector<const Sample*> clean, all;
  for (const Sample& s : samples)
    if (of_kind(s.op.kind)) {
      all.push_back(&s);
      if (s.overlap <= 0.05 * s.dur) clean.push_back(&s);
    }
  return clean.size() >= 3 ? clean : all;
}

// The standalone time t with dur = t + overlap (1 - rate(t)): a collective's rate depends on t (the
// per-collective delay), so a few fixed-point steps (each moves t by less than the delay's share).
double TraceSamples::interference_free(const Sample& s) const {
  const InterferenceProfile& i = base.interference;
  if (!collective(s.op.kind)) return (s.dur - s.overlap * (1 - i.compute_rate())) / compute_stretch(base);
  double t = s.dur;
  for (int step = 0; step < 8; ++step) t = s.dur - s.overlap * (1 - i.comm_rate(std::max(t, 1e-3)));
  return t;
}

SerialCost TraceSamples::serial_cost(const CostModel& cm, double compute_stall,
                                     double stall_per_op_us) const {
  SerialCost out;
  const double sync = cm.sync_us(tp, devices_per_node);
  const double stretch = (1 + compute_stall) * compute_stretch(cm.profile());
  for (const Sample& s : samples) {
    const bool comm = collective(s.op.kind);
    const double us = cm.op_us(s.op, tp, devices_per_node);
    out.us += comm ? (s.aligned ? std::max(0.0, us - sync) : us) : us * stretch + stall_per_op_us;
    out.overlapped_us += s.overlap;
    out.collectives += comm;
    out.compute_ops += !comm;
    out.skewed_collectives += comm && !s.aligned;
  }
  return out;
}

}  // namespace domino::prof::calibration
