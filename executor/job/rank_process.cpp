// rank_process.cpp: one rank from start to report (see rank_process.hpp).
#include "executor/job/rank_process.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "executor/job/backends.hpp"
#include "executor/job/job.hpp"
#include "executor/job/launch_env.hpp"
#include "executor/job/multi_plan.hpp"
#include "executor/job/plan_set.hpp"
#include "executor/job/preflight.hpp"
#include "executor/job/rank_placement.hpp"
#include "executor/runtime/gloo_comm.hpp"
#include "executor/runtime/rank_runner.hpp"
#include "executor/runtime/results.hpp"
#include "executor/runtime/tensor_dump.hpp"
#include "sim/base/error.hpp"
#include "sim/base/files.hpp"

namespace domino {
namespace {

std::string env_text(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Env mode's rendezvous: the TCP store at MASTER_ADDR:MASTER_PORT.
CommConfig env_comm_config(const ExecOptions& o, int rank, int world) {
  CommConfig c;
  c.rank = rank;
  c.world = world;
  c.timeout = std::chrono::seconds(o.run.timeout_s);
  const Rendezvous rendezvous = read_rendezvous(process_env());
  c.master_addr = rendezvous.addr;
  c.master_port = rendezvous.port;
  if (!o.run.bind_address.empty()) c.bind_address = o.run.bind_address;
  else if (!env_text("DOMINO_BIND_ADDR").empty()) c.bind_address = env_text("DOMINO_BIND_ADDR");
  else c.bind_address = local_address_towards(c.master_addr, c.master_port);
  return c;
}

void print_iteration(int it, const IterationRecord& rec) {
  std::printf("iter %3d%s  loss %.6f  time %.3f ms\n", it, rec.timed ? "          " : " (warm-up)", double(rec.loss),
              rec.time_us / 1000.0);
  std::fflush(stdout);
}

void write_outputs(const ExecOptions& o, const Job& job, const std::vector<RankResult>& results) {
  const RunSettings& r = o.run;
  const RunSummary summary = summarize(results, job.schedule, r.trace_iterations);
  const nlohmann::json meta = run_meta(o);
  if (!r.trace_path.empty()) write_trace(r.trace_path, job.schedule, summary.timeline, meta);
  if (!r.json_path.empty()) write_file_atomic(r.json_path, summary_json(summary, job.schedule, meta).dump(2) + "\n");
  if (r.quiet) return;
  double peak = 0;
  for (int64_t b : summary.timeline.peak_memory_bytes) peak = std::max(peak, double(b));
  std::printf(
      "%s %s tp %d: iteration %.3f ms mean, %.3f median (p10 %.3f, p90 %.3f) over %zu iterations; "
      "peak memory %.1f MiB per rank\n",
      job.model.name.c_str(), job.plan.strategy.c_str(), job.model.tp, summary.mean_us / 1000.0,
      summary.median_us / 1000.0, summary.p10_us / 1000.0, summary.p90_us / 1000.0,
      summary.timeline.iteration_samples_us.size(), peak / (1 << 20));
  std::fflush(stdout);
}

void write_rank_snapshot(const std::string& path, const Job& job, Backend& backend, int rank, float loss) {
  RankSnapshot snap;
  snap.rank = rank;
  snap.loss = loss;
  for (size_t i = 0; i < job.schedule.buffers.size(); ++i)
    snap.buffers.push_back(job.schedule.buffers[i].role == BufferRole::Workspace
                               ? std::vector<float>{}
                               : backend.read_buffer(job.schedule, int32_t(i)));
  write_snapshot(path, snap);
}

// Before rendezvous: the outside launcher started as many ranks as `what` ("the job has"), and this rank's
// host holds them (preflight with the launcher's count of ranks here).
void check_env_rank(const ExecOptions& o, const LaunchEnv& launch, const std::vector<const Job*>& jobs, int ranks,
                    const std::string& what) {
  if (launch.world != ranks)
    throw_bad_input(launch.launcher + " started " + std::to_string(launch.world) + " ranks but " + what + " " +
                    std::to_string(ranks) + " (the TP degree)");
  run_preflight(o, *make_backend(o.backend), jobs, env_host_ranks(launch));
}

}  // namespace

std::unique_ptr<Backend> prepared_backend(const ExecOptions& o, const Job& job, GlooComm& comm) {
  std::unique_ptr<Backend> backend = make_backend(o.backend);
  RankContext ctx;
  ctx.rank = comm.rank();
  ctx.world = comm.world();
  ctx.seed = o.run.seed;
  ctx.hyper.lr = float(o.run.lr);
  ctx.hyper.weight_decay = float(o.run.weight_decay);
  ctx.threads = o.run.threads;
  ctx.comm = &comm;
  ctx.link_latency_us = o.run.link_latency_us;
  ctx.timeout_s = o.run.timeout_s;
  backend->prepare(job.schedule, ctx);
  return backend;
}

RunnerOptions runner_options(const RunSettings& r, const Backend& backend) {
  RunnerOptions ro;
  ro.warmup = r.warmup;
  ro.iters = r.iters;
  ro.check_finite = r.nan_check.value_or(backend.scans_for_nan_by_default());
  ro.dump_iter = r.dump_dir.empty() ? -1 : r.dump_iter;
  ro.dump_dir = r.dump_dir;
  ro.compute_cpu = r.compute_cpu;
  ro.wait = r.wait;
  ro.compute_leaves_realtime = r.realtime;
  return ro;
}

nlohmann::json run_meta(const ExecOptions& o) {
  const RunSettings& r = o.run;
  return {{"backend", o.backend},
          {"seed", r.seed},
          {"threads", r.threads},
          {"optimizer", r.optimizer},
          {"link_gbps", r.link_gbps},
          {"link_latency_us", r.link_latency_us},
          {"cpu_placement", placement_name(effective_placement(r))},
          {"worker_wait", wait_name(r.wait)},
          {"realtime", r.realtime}};
}

bool env_mode() { return read_launch_env(process_env()).has_value(); }

void run_rank_process(const ExecOptions& given) {
  const std::optional<LaunchEnv> launch = read_launch_env(process_env());
  if (!launch) throw_bad_input("env mode needs a rank and a world size (RANK and WORLD_SIZE, or Open MPI's or srun's)");
  export_torchrun_names(*launch);  // the backends read LOCAL_RANK whichever launcher started us
  ExecOptions o = given;
  const HostSlot slot = env_host_slot(*launch);
  enter_rank_placement(&o.run, slot.index, slot.ranks);
  if (runs_several_plans(o.job)) {
    const PlanSet set = resolve_plan_set(o);
    check_env_rank(o, *launch, plan_jobs(set), set.ranks, "the plans have");
    run_several_plans_rank(o, set, env_comm_config(o, launch->rank, launch->world));
    return;
  }
  const Job job = resolve_job(o);
  check_env_rank(o, *launch, {&job}, job.ranks, "the job has");
  run_rank(o, job, env_comm_config(o, launch->rank, launch->world));
}

void run_rank(const ExecOptions& o, const Job& job, const CommConfig& config, const std::string& snapshot_path) {
  const RunSettings& r = o.run;
  if (!r.dump_dir.empty() && r.dump_iter >= r.warmup + r.iters)
    throw_bad_input("--dump-iter " + std::to_string(r.dump_iter) + " is past the last iteration (" +
                    std::to_string(r.warmup + r.iters - 1) + ")");
  GlooComm comm(config);
  const int rank = comm.rank();
  std::unique_ptr<Backend> backend = prepared_backend(o, job, comm);

  const RunnerOptions ro = runner_options(r, *backend);
  std::function<void(int, const IterationRecord&)> report;
  if (rank == 0 && !r.quiet) report = print_iteration;
  const RankResult result = run_iterations(job.schedule, *backend, &comm, rank, ro, report);

  if (!snapshot_path.empty()) write_rank_snapshot(snapshot_path, job, *backend, rank, result.iterations.back().loss);
  publish_rank_result(comm, "result", result);
  if (rank != 0) return;
  write_outputs(o, job, gather_rank_results(comm, "result"));
}

void publish_rank_result(GlooComm& comm, const std::string& key, const RankResult& result) {
  comm.store_set(key + "." + std::to_string(comm.rank()), rank_result_to_text(result));
}

std::vector<RankResult> gather_rank_results(GlooComm& comm, const std::string& key) {
  std::vector<RankResult> all;
  for (int q = 0; q < comm.world(); ++q)
    all.push_back(rank_result_from_text(comm.store_get(key + "." + std::to_string(q))));
  return all;
}

}  // namespace domino
