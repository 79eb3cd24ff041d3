// job.cpp: options -> model, plan, schedule (see job.hpp).
#include "executor/job/job.hpp"

#include <yaml-cpp/yaml.h>

#include "sim/base/error.hpp"

namespace domino {

PlanHeader read_plan_header(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw_bad_input(path + ": cannot open the plan file (to run a named strategy: domino-exec MODEL --strategy NAME)");
  } catch (const YAML::Exception& e) {
    throw_bad_input(path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                    ": not valid YAML: " + e.msg);
  }
  PlanHeader h;
  if (!root.IsMap()) throw_bad_input(path + ": a plan file is a YAML mapping (docs/plan-format.md)");
  if (root["model"] && root["model"].IsMap() && root["model"]["name"] && root["model"]["name"].IsScalar())
    h.model_name = root["model"]["name"].Scalar();
  if (root["tp"] && root["tp"].IsScalar()) {
    try {
      h.tp = root["tp"].as<int>();
    } catch (const YAML::Exception&) {
      h.tp = 0;  // load_plan reports it with its location
    }
  }
  return h;
}

Job resolve_job(const ExecOptions& o) {
  Job job;
  ModelOverrides overrides = o.job.overrides;
  if (!o.job.strategy.empty()) {
    if (!o.job.target.empty() && !o.job.model.empty())
      throw_bad_input("with --strategy give the model once (positional or --model), not both");
    job.model_source = o.job.model.empty() ? o.job.target : o.job.model;
    job.model = load_model(job.model_source, overrides);
    job.plan = make_strategy_plan(o.job.strategy, job.model);
  } else {
    if (o.job.target.empty()) throw_bad_input("give a plan file, or a model with --strategy NAME");
    const PlanHeader header = read_plan_header(o.job.target);
    job.model_source = o.job.model.empty() ? header.model_name : o.job.model;
    if (job.model_source.empty())
      throw_bad_input(o.job.target +
                      ": the plan names no model (model: {name: ...}); pass --model MODEL, or, "
                      "if this is a model file, a strategy to run on it (--strategy NAME)");
    if (!overrides.tp && header.tp > 0) overrides.tp = header.tp;
    job.model = load_model(job.model_source, overrides);
    job.plan = load_plan(o.job.target, job.model, o.job.force);
  }
  complete_job(o, &job);
  return job;
}

int job_ranks(const JobRequest& request, const ModelSpec& model) {
  const int ranks = request.ranks > 0 ? request.ranks : model.tp;
  if (ranks != model.tp)
    throw_bad_input("--ranks " + std::to_string(ranks) + " differs from the TP degree " + std::to_string(model.tp) +
                    ": every rank is one tensor-parallel shard (use --tp)");
  return ranks;
}

void complete_job(const ExecOptions& o, Job* job) {
  const std::optional<OptimizerKind> optimizer = optimizer_kind_named(o.run.optimizer);
  if (!optimizer) throw_bad_input("--optimizer " + o.run.optimizer + ": expected adam or sgd");
  job->build.optimizer = *optimizer;
  job->ranks = job_ranks(o.job, job->model);
  job->schedule = build_schedule(job->model, job->plan, job->build);
}

}  // namespace domino
