// plan_set.hpp: the plans of one interleaved launch (domino-exec --plans / --plans-file): one model, several
// plans, each with its own schedule built once here (the executor still runs each plan's IR as built).
#pragma once

#include <string>
#include <vector>

#include "executor/job/exec_options.hpp"
#include "executor/job/job.hpp"

namespace domino {

struct PlanEntry {
  std::string label;   // names its outputs: a plan file's stem, or the strategy name with ':' as '-'
  std::string source;  // what was given: the plan file's path or the strategy name
  Job job;
};

struct PlanSet {
  std::vector<PlanEntry> plans;  // in the order given: the first round's order (later rounds rotate it)
  size_t baseline = 0;           // the plan ratios are taken against: megatron-async when given, else the first
  int ranks = 1;
};

// Resolves --plans and --plans-file into one model and a schedule per plan. The model: --model, or the
// positional target, or the model the first plan file names. BadInput naming the plan for a plan made for
// another model, TP degree or model shape, an unknown strategy, two plans with one label, or no plan.
PlanSet resolve_plan_set(const ExecOptions& options);

// The set's jobs in order: what every rank of the launch holds at once.
std::vector<const Job*> plan_jobs(const PlanSet& set);

}  // namespace domino
