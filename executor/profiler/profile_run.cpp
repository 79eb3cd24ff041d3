// profile_run.cpp: measuring (workload -> forked ranks measuring through the backend -> fit -> profile file) and calibrating
// (trace -> fit -> profile file), with what the user sees on stdout and stderr.
#include "executor/profiler/profile_run.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "executor/job/backends.hpp"
#include "executor/profiler/cached_add.hpp"
#include "executor/profiler/drift_reference.hpp"
#include "executor/profiler/profile_meta.hpp"
#include "executor/profiler/profile_workload.hpp"
#include "executor/profiler/rank_fork.hpp"
#include "executor/profiler/rank_measure.hpp"
#include "sim/base/error.hpp"
#include "sim/fit/calibrate.hpp"
#include "sim/fit/profile_fit.hpp"

namespace domino::prof {

namespace {

std::string stem_of(const std::string& path) { return std::filesystem::path(path).stem().string(); }

// The probes: the size grid in the backend's GEMM dtype, or the --for models' shapes.
Workload plan_for(const ProfileOptions& o, const ProfilingTraits& traits, std::string* what) {
  WorkloadOptions wo;
  wo.tp = o.tp;
  wo.quick = o.quick;
  wo.grid_dtype = traits.gemm_dtype;
  wo.whole_blocked_gemms = traits.whole_blocked_gemms;
  if (!o.for_model.empty()) {
    ModelOverrides ov;
    if (o.tp_given) ov.tp = o.tp;
    std::string list = o.for_model;
    for (size_t start = 0; start <= list.size();) {
      const size_t comma = std::min(list.find(',', start), list.size());
      const std::string name = list.substr(start, comma - start);
      if (!name.empty()) wo.models.push_back(load_model(name, ov));
      start = comma + 1;
    }
  }
  Workload w = plan_workload(wo);
  *what = fmt::format(
      "{} GEMM shapes ({}), {} memory-bound ops, {} attention ops, {} sizes of AllReduce, AllGather and "
      "ReduceScatter up to {} B on {} ranks{}{}",
      w.gemms.size(), !wo.models.empty() ? "every shape of the plans of " + w.model_name : "size grid", w.memory_ops.size(),
      w.attention.size(), w.allreduce_bytes.size(), int64_t(w.allreduce_bytes.empty() ? 0 : w.allreduce_bytes.back()),
      o.tp, o.link_gbps > 0 ? fmt::format(" over an emulated {} Gbit/s link", o.link_gbps) : "",
      o.quick ? " (--quick)" : "");
  return w;
}

// What one node's ranks cannot measure comes from --profile when given: how many devices share a node,
// and the link between nodes.
void take_node_figures(const std::string& base_profile, Profile& p) {
  if (base_profile.empty()) return;
  const Profile base = load_profile(resolve_profile_path(base_profile));
  p.devices_per_node = base.devices_per_node;
  p.inter_node = base.inter_node;
  p.notes += "; devices per node and the inter-node link from " + base.name;
}

// What the GEMM probes' drift reference saw, rank by rank (empty without one); `unsteady` gets the ranks
// whose reference spread wider than a correction can undo (DriftSpread::steady), as "rank R p10-p90".
std::string gemm_drift_note(const std::vector<nlohmann::json>& ranks, std::string& unsteady) {
  std::string spans;
  std::string reference;
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    const nlohmann::json& r = ranks[rank];
    if (!r.contains("gemm_drift")) continue;
    const DriftSpread d = drift_spread(r["gemm_drift"].at("times_us").get<std::vector<double>>());
    if (d.timings == 0) continue;  // a workload without GEMMs
    reference = r["gemm_drift"].at("reference").get<std::string>();
    const std::string span = fmt::format("{:.3f}-{:.3f}", d.p10, d.p90);
    spans += (spans.empty() ? "" : ", ") + span;
    if (!d.steady()) unsteady += fmt::format("{}rank {} {}", unsteady.empty() ? "" : ", ", rank, span);
  }
  if (spans.empty()) return "";
  std::string note = fmt::format(
      "; GEMM probes corrected for the machine's drift against a {} reference timed beside each (its time "
      "over its median, p10-p90 per rank: {})",
      reference, spans);
  if (!unsteady.empty())
    note += fmt::format(
        "; UNSTEADY: the reference spread wider than {:g}x ({}): GEMM shapes may be off "
        "by tens of percent against each other, measure again",
        kSteadyDriftSpread, unsteady);
  return note;
}

}  // namespace

void run_measure(const ProfileOptions& o) {
  if (o.output.empty()) throw_bad_input("give -o PROFILE.yaml (where to write the profile)");
  // Checks the name (BadInput naming the known backends) and asks what differs; touches no device.
  const ProfilingTraits traits = make_backend(o.backend)->profiling_traits();
  if (o.tp < 1 || o.tp > 64) throw_bad_input("--tp must be between 1 and 64");
  if (o.link_gbps < 0) throw_bad_input("--link-gbps must be positive");
  if (o.collectives_after_compute && o.backend != "cpu")
    throw_bad_input(
        "--collectives-after-compute is a CPU backend probe (its GEMMs' effect on a collective "
        "is measured on the host only); the " +
        o.backend + " backend times collectives alone");
  const auto t_start = std::chrono::steady_clock::now();

  ForkOptions fo;
  fo.ranks = o.tp;
  fo.link_gbps = o.link_gbps;
  fo.timeout_s = o.timeout_s;
  if (o.placement) fo.placement = *o.placement;
  fo.placement_given = o.placement.has_value();
  fo.idle_poll = o.idle_poll;
  fo.realtime = o.realtime;
  const CpuPlacement placement = check_placement(fo);  // before the workload is planned and announced
  std::string what;
  const Workload w = plan_for(o, traits, &what);
  std::fprintf(stderr, "domino-profile: measuring %s; load average %s\n", what.c_str(), load_average().c_str());

  FitInput in;
  in.tp = o.tp;
  in.link_gbps = o.link_gbps;
  in.backend = o.backend;
  in.gemms_in_op_dtype = traits.gemms_in_op_dtype;
  in.name = o.name.empty() ? stem_of(o.output) : o.name;
  in.workload_note = "measured: " + what + "; memory-bound and attention shapes cut from " + w.model_name +
                     " schedules";
  MeasureOptions mo;
  mo.quick = o.quick;
  mo.link_gbps = o.link_gbps;
  mo.backend = o.backend;
  mo.realtime = o.realtime;
  mo.collectives_after_compute = o.collectives_after_compute;
  mo.drift_reference = o.drift_reference && o.backend == "cpu";
  in.workload_note += placement == CpuPlacement::Rank
                          ? std::string("; each rank pinned to its own CPU (--cpu-placement rank)") +
                                (o.idle_poll ? ", kept awake by an idle-priority poller"
                                             : ", halting when idle (--no-idle-poll)")
                          : "; the ranks' threads placed by the kernel (--cpu-placement none)";
  if (o.realtime)
    in.workload_note += "; the ranks' threads SCHED_FIFO, communication above compute (--realtime)";
  in.ranks = run_ranks(fo, [&](GlooComm& comm) { return measure_rank(w, comm, mo); });
  const nlohmann::json& allreduces = in.ranks.front().value("collectives", nlohmann::json::array());
  if (!allreduces.empty() && allreduces.front().contains("compute_before_us"))
    in.workload_note += fmt::format(
        "; each collective after {:.0f} us of GEMMs on the compute stream, as in a "
        "training step (per repeat the last rank's time: the transfer alone)",
        allreduces.front()["compute_before_us"].get<double>());
  std::string unsteady;
  in.workload_note += gemm_drift_note(in.ranks, unsteady);
  if (!unsteady.empty())
    std::fprintf(stderr,
                 "domino-profile: warning: the machine's speed moved during the GEMM probes beyond what the "
                 "drift reference corrects (its time over its median, p10-p90: %s; a steady machine stays "
                 "within %gx): the GEMM table may be off by tens of percent shape to shape; measure again "
                 "when the machine is quieter (the profile's notes say UNSTEADY)\n",
                 unsteady.c_str(), kSteadyDriftSpread);
  in.metadata = machine_metadata(o.backend);
  in.load_average_at_end = load_average();
  FitResult fit = fit_profile(in);
  if (o.backend == "cpu") fit.summary += add_cached_add_figures(fit.profile);
  take_node_figures(o.base_profile, fit.profile);
  save_profile(fit.profile, o.output);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  std::printf("%s", fit.summary.c_str());
  std::printf("wrote %s (%.0f s)\n", o.output.c_str(), secs);
}

void run_calibrate(const ProfileOptions& o) {
  if (o.output.empty()) throw_bad_input("give -o PROFILE.yaml (where to write the calibrated profile)");
  const TraceFile trace = read_trace(o.calibrate_trace);
  if (trace.source != "measured")
    std::fprintf(stderr, "domino-profile: warning: %s is a '%s' trace, not a measured one\n", trace.path.c_str(),
                 trace.source.c_str());
  std::string base_arg = o.base_profile;
  if (base_arg.empty() && trace.meta.contains("profile") && trace.meta["profile"].is_string())
    base_arg = trace.meta["profile"].get<std::string>();
  if (base_arg.empty() && trace.meta.contains("model") && trace.meta["model"].is_string())
    base_arg = default_profile_name(load_model(trace.meta["model"].get<std::string>()));
  if (base_arg.empty()) throw_bad_input("give --profile P: the trace names no profile and no model");
  const Profile base = load_profile(resolve_profile_path(base_arg));
  CalibrationResult res = calibrate_profile(base, trace, o.tp_given ? o.tp : 0, parse_calibration_scope(o.fit));
  if (!o.name.empty()) res.profile.name = o.name;
  else res.profile.name = stem_of(o.output);
  save_profile(res.profile, o.output);
  std::printf("calibrated %s on %s\n%swrote %s\n", base.name.c_str(), trace.path.c_str(), res.report.c_str(),
              o.output.c_str());
}

}  // namespace domino::prof
