// launcher.cpp: domino-exec's launches (see launcher.hpp). The ranks are forked: they get the options and
// the resolved job as the parent's memory, so nothing is turned back into arguments or resolved again.
#include "executor/job/launcher.hpp"

#include "executor/job/backends.hpp"
#include "executor/job/grad_check.hpp"
#include "executor/job/multi_plan.hpp"
#include "executor/job/plan_set.hpp"
#include "executor/job/preflight.hpp"
#include "executor/job/rank_placement.hpp"
#include "executor/job/rank_process.hpp"
#include "executor/runtime/rank_launcher.hpp"
#include "sim/base/error.hpp"

namespace domino {
namespace {

// What every launch checks before any process starts: the backend (an unknown or unavailable one; this touches
// no device), that the ranks fit this host (a rank holds the buffers of every job given), and that an
// emulated link has two ends (--check runs no timed launch, so it needs none).
void check_before_launch(const ExecOptions& options, const std::vector<const Job*>& jobs, int ranks) {
  const std::unique_ptr<Backend> backend = make_backend(options.backend);
  run_preflight(options, *backend, jobs, launcher_host_ranks(ranks));
  check_placement(options.run, ranks);
  if (options.run.check) return;
  if ((options.run.link_gbps > 0 || options.run.link_latency_us > 0) && ranks < 2)
    throw_bad_input("--link-gbps/--link-latency-us need at least 2 ranks");
}

std::string expand_rank(std::string pattern, int rank) {
  if (const size_t at = pattern.find("{rank}"); at != std::string::npos) pattern.replace(at, 6, std::to_string(rank));
  return pattern;
}

}  // namespace

void launch_rank_bodies(const ExecOptions& options, int ranks, const RankBodyWithOptions& body) {
  LaunchOptions lo;
  lo.ranks = ranks;
  lo.link_gbps = options.run.link_gbps;
  lo.temp_prefix = "domino-exec";
  lo.output_paths = {options.run.trace_path, options.run.json_path, options.run.dump_dir, options.run.out_dir};
  launch_ranks(lo, [&](const RankSlot& slot) {
    CommConfig comm;
    comm.rank = slot.rank;
    comm.world = slot.world;
    comm.store_dir = slot.rendezvous_dir;
    comm.bind_address = slot.bind_address;
    comm.timeout = std::chrono::seconds(options.run.timeout_s);
    ExecOptions placed = options;  // this rank's copy: its cores
    enter_rank_placement(&placed.run, slot.rank, slot.world);
    body(placed, comm);
    return std::string();
  });
}

void launch_job(const ExecOptions& options, const Job& job, const std::string& snapshot_pattern) {
  launch_rank_bodies(options, job.ranks, [&](const ExecOptions& placed, const CommConfig& comm) {
    run_rank(placed, job, comm, snapshot_pattern.empty() ? "" : expand_rank(snapshot_pattern, comm.rank));
  });
}

int run_exec(const ExecOptions& given) {
  ExecOptions options = given;
  make_paths_absolute(&options);
  if (runs_several_plans(options.job)) {
    const PlanSet set = resolve_plan_set(options);  // bad input surfaces here, before any process starts
    check_before_launch(options, plan_jobs(set), set.ranks);
    launch_rank_bodies(options, set.ranks, [&](const ExecOptions& placed, const CommConfig& comm) {
      run_several_plans_rank(placed, set, comm);
    });
    return 0;
  }
  const Job job = resolve_job(options);  // bad input surfaces here, before any process starts
  check_before_launch(options, {&job}, job.ranks);
  if (options.run.check) return run_gradient_check(options, job);
  launch_job(options, job);
  return 0;
}

}  // namespace domino
