// calibrate.cpp: the --fit scope and calibrate_profile (see calibrate.hpp): per-op samples from a measured
// trace, one fit per cost term in a fixed order (calibrate_compute.cpp, calibrate_comm.cpp), then the fit
// quality per op kind. Ops that overlapped the other stream fit the interference; the others the base costs.
#include "sim/fit/calibrate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "sim/base/error.hpp"
#include "sim/fit/calibrate_terms.hpp"

namespace domino::prof {

namespace {

using calibration::Sample;
using calibration::TraceSamples;

struct ErrorSum {
  double abs = 0, total = 0;
  int n = 0;
};

// The simulator's rate model over the measured overlap: the op's time with the profile's interference. A
// compute op's sample does not say which collectives it overlapped, so it takes the flat compute rate (the
// simulator's, less the share a collective's delay waits, InterferenceProfile::compute_rate_beside).
double predict(const CostModel& cm, const TraceSamples& in, const Sample& s) {
  const double t = cm.op_us(s.op, in.tp, in.devices_per_node) *
                   (collective(s.op.kind) ? 1.0 : in.compute_stretch(cm.profile()));
  const InterferenceProfile& i = cm.profile().interference;
  const double rate = collective(s.op.kind) ? i.comm_rate(t) : i.compute_rate();
  return t + s.overlap * (1 - rate);
}

// Fit quality: per kind, then over all ops, sum |pred - measured| / sum measured before and after.
std::vector<KindError> kind_errors(const TraceSamples& in, const Profile& calibrated) {
  const CostModel before(in.base), after(calibrated);
  std::map<std::string, std::pair<ErrorSum, ErrorSum>> err;
  for (const Sample& s : in.samples) {
    for (const std::string& key : {std::string(to_string(s.op.kind)), std::string("all")}) {
      auto& [b, a] = err[key];
      b.abs += std::abs(predict(before, in, s) - s.dur);
      a.abs += std::abs(predict(after, in, s) - s.dur);
      b.total += s.dur;
      a.total += s.dur;
      ++b.n;
    }
  }
  std::vector<KindError> out;
  for (const auto& [kind, e] : err) {
    if (kind == "all") continue;
    out.push_back({kind, e.first.n, e.first.abs / e.first.total, e.second.abs / e.second.total});
  }
  const auto& all = err["all"];
  out.push_back({"all", all.first.n, all.first.abs / all.first.total, all.second.abs / all.second.total});
  return out;
}

std::string kind_error_table(const std::vector<KindError>& errors) {
  std::string out = "per-op error (sum |predicted - measured| / sum measured), before -> after:\n";
  for (const KindError& e : errors)
    out += fmt::format("  {:<12} {:>5} ops  {:6.1f}% -> {:6.1f}%\n", e.kind, e.ops, 100 * e.before, 100 * e.after);
  return out;
}

}  // namespace

CalibrationScope parse_calibration_scope(const std::string& list) {
  if (list.empty() || list == "all") return {};
  CalibrationScope s{false, false, false, false, false, false, false, false};
  const std::pair<const char*, bool*> names[] = {{"memory", &s.memory},
                                                 {"gemm", &s.gemm},
                                                 {"attention", &s.attention},
                                                 {"allreduce", &s.allreduce},
                                                 {"allgather", &s.allgather},
                                                 {"sync", &s.sync},
                                                 {"reducescatter", &s.reducescatter},
                                                 {"interference", &s.interference},
                                                 {"sync_growth", &s.sync_growth},
                                                 {"sync_iteration", &s.sync_iteration},
                                                 {"comm_delay", &s.comm_delay},
                                                 {"comm_start", &s.comm_start},
                                                 {"stall", &s.stall},
                                                 {"memory_rows", &s.memory_rows},
                                                 {"later_chunks", &s.later_chunks},
                                                 {"interference_iteration", &s.interference_iteration},
                                                 {"transfer", &s.transfer},
                                                 {"sp_transfer", &s.sp_transfer},
                                                 {"comm_compute", &s.comm_compute}};
  for (size_t start = 0; start <= list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string name = list.substr(start, comma - start);
    bool* flag = nullptr;
    for (const auto& [n, f] : names)
      if (name == n) flag = f;
    if (!flag)
      throw_bad_input("--fit: unknown part '" + name +
                      "' (give a comma-separated list of memory, gemm, attention, allreduce, allgather, "
                      "reducescatter, sync, sync_growth, sync_iteration, interference, comm_delay, "
                      "comm_start, stall, memory_rows, later_chunks, interference_iteration, transfer, "
                      "sp_transfer, comm_compute, or all)");
    *flag = true;
    start = comma + 1;
  }
  s.sync = s.sync || s.sync_growth || s.sync_iteration;
  return s;
}

CalibrationResult calibrate_profile(const Profile& base, const TraceFile& trace, int tp, const CalibrationScope& scope) {
  using namespace calibration;
  // A gpu section times GEMMs from tiles and models interference by SM and HBM sharing: neither the
  // GEMM curve nor the flat factors would change its predictions, so fitting them would mislead.
  if (base.gpu && (scope.gemm || scope.interference || scope.comm_delay || scope.comm_start || scope.stall ||
                   scope.interference_iteration || scope.comm_compute)) {
    throw_bad_input("profile '" + base.name + "' has a gpu section (GEMM tiles in waves, SM and HBM sharing), " +
                    "which calibration does not fit: use --fit memory,attention,allreduce,allgather,reducescatter,sync");
  }
  const TraceSamples in(base, trace, tp);
  Profile p = base;
  std::string report;
  if (scope.memory) {
    fit_memory_general(in, p, report);
    fit_memory_per_kind(in, p, report);
    fit_memory_per_code(in, p, report);
  }
  if (scope.memory_rows) fit_memory_rows(in, p, report);
  if (scope.later_chunks) fit_later_chunks(in, p, report);
  const CostModel after_memory(p);  // GEMM and attention both scale against the costs before either changed
  if (scope.gemm) fit_gemm_scales(in, after_memory, p, report);
  if (scope.attention) fit_attention_scales(in, after_memory, p, report);
  if (scope.stall)
    fit_compute_stall(in, measured_iteration_us(trace, "stall"), compute_gap_per_op(trace), p, report);
  if (scope.comm_compute) fit_compute_with_comm(in, p, report);
  if (scope.allreduce) fit_collective(in, OpKind::AllReduce, p, report);
  if (scope.allgather) fit_collective(in, OpKind::AllGather, p, report);
  if (scope.reducescatter) fit_collective(in, OpKind::ReduceScatter, p, report);
  const bool pooled = (scope.sync && !scope.sync_iteration) || scope.comm_delay || scope.comm_start ||
                      scope.transfer || scope.sp_transfer;
  const std::vector<std::vector<TraceEvent>> iterations =
      pooled ? every_iteration(trace) : std::vector<std::vector<TraceEvent>>{};
  if (scope.transfer) fit_transfer_terms(in, iterations, p, report);
  if (scope.sp_transfer) fit_sp_transfer_terms(in, iterations, p, report);
  if (scope.sync_iteration)
    fit_skew_to_iteration(in, measured_iteration_us(trace, "sync_iteration"), scope.sync_growth, p, report);
  else if (scope.sync)
    fit_arrival_skew(in, ranks_share_a_clock(trace) ? iterations : std::vector<std::vector<TraceEvent>>{},
                     scope.sync_growth, p, report);
  if (scope.interference) fit_interference(in, p, report);
  if (scope.comm_delay) fit_comm_delay(in, iterations, p, report);
  if (scope.comm_start) fit_comm_start(trace, iterations, p, report);
  if (scope.interference_iteration)
    fit_compute_slowdown_to_iteration(schedule_of_trace(trace),
                                      measured_iteration_us(trace, "interference_iteration"), p, report);
  validate_profile(p);

  CalibrationResult res;
  res.errors = kind_errors(in, p);
  report += kind_error_table(res.errors);
  p.source = "calibrated by domino-profile --calibrate on " + trace.path + " from " +
             (base.path.empty() ? base.name : base.path);
  p.notes = (base.notes.empty() ? "" : base.notes + "; ") + "calibration: " + report;
  res.profile = p;
  res.report = report;
  return res;
}

}  // namespace domino::prof
