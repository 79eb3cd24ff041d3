// rank_process.hpp: the body of one rank: join the group, prepare the backend, run the iterations, report.
// Forked by the launcher (launcher.hpp) or, in env mode, started by an outside launcher such as torchrun,
// srun or mpirun (launch_env.hpp; rendezvous at MASTER_ADDR:MASTER_PORT); rank 0 gathers every rank's
// report through the rendezvous store and writes the trace and the summary.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "executor/job/exec_options.hpp"
#include "executor/job/job.hpp"
#include "executor/runtime/backend.hpp"
#include "executor/runtime/gloo_comm.hpp"
#include "executor/runtime/rank_runner.hpp"

namespace domino {

// True when an outside launcher's rank and world size are set (torchrun's, Open MPI's or an srun step's;
// launch_env.hpp): this process is one rank of that launch.
bool env_mode();

// Env mode: resolves the job (or the plans of --plans) and runs this process's rank; throws domino::Error naming the rank on failure.
void run_rank_process(const ExecOptions& options);

// Runs rank comm.rank of `job` in group `comm`. With snapshot_path set, writes every buffer of the rank
// after the run there (--check). Throws domino::Error naming the rank on failure.
void run_rank(const ExecOptions& options, const Job& job, const CommConfig& comm,
              const std::string& snapshot_path = "");

// Rank reports through the group's store: each rank publishes its own under KEY.RANK; rank 0 then gathers
// every rank's, in rank order.
void publish_rank_result(GlooComm& comm, const std::string& key, const RankResult& result);
std::vector<RankResult> gather_rank_results(GlooComm& comm, const std::string& key);

// The run's backend, prepared for job's schedule on this rank (buffers allocated once, parameters initialised).
std::unique_ptr<Backend> prepared_backend(const ExecOptions& options, const Job& job, GlooComm& comm);

// The runtime's options for a run with these settings on this backend (its NaN-scan default).
RunnerOptions runner_options(const RunSettings& settings, const Backend& backend);

// What a run's trace and summary record about how it ran (backend, seed, threads, optimizer, link).
nlohmann::json run_meta(const ExecOptions& options);

}  // namespace domino
