// job.hpp: what a domino-exec run trains: the model, the plan and the schedule IR built from them. The
// launcher and every rank process resolve the same options to the same job.
#pragma once

#include <string>

#include "executor/job/exec_options.hpp"
#include "sim/ir/schedule.hpp"

namespace domino {

struct Job {
  std::string model_source;  // what load_model was given (a shipped model's name or a file)
  ModelSpec model;
  Plan plan;
  BuildOptions build;
  Schedule schedule;
  int ranks = 1;
};

// Loads the model (from --model, the plan's model name, or the target with --strategy), the plan (file or
// named strategy) and builds the schedule. BadInput on anything inconsistent (a plan for another model or
// TP degree unless --force, --ranks other than the TP degree).
Job resolve_job(const ExecOptions& options);

// The job's ranks: --ranks, else the model's TP degree. BadInput when --ranks differs from the TP degree.
int job_ranks(const JobRequest& request, const ModelSpec& model);

// What follows once job->model and job->plan are known (one job, or each plan of --plans): the ranks
// (job_ranks), the optimizer and the schedule.
void complete_job(const ExecOptions& options, Job* job);

// The model a plan file names (model: {name: ...}) and its TP degree, read before the model is known.
struct PlanHeader {
  std::string model_name;
  int tp = 0;
};
PlanHeader read_plan_header(const std::string& path);

}  // namespace domino
