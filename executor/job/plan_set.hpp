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
  std::vector<PlanEntry> plans;  // in the order given: the order of every interleaved round
  size_t baseline = 0;           // the plan ratios are taken against: megatron-async when given, else the first
  int ranks = 1;
};

// Resolves --plans and --plans-file into one model and a schedule per plan. The model: --model, or the
// positional target, or the model the first plan file names. BadInput naming the plan for a plan made for
// another model, TP degree or model shape, an unknown strategy, two plans with one label, or no plan.
PlanSet resolve_plan_set(const ExecOptions& options);

// The entries of a plans file: one plan file or strategy name per line; blank lines and '#' comments are
// skipped; relative plan paths are taken from the file's folder. BadInput when it cannot be read.
std::vector<std::string> read_plans_file(const std::string& path);

// True when an entry names a plan file (ends in .yaml/.yml or holds a '/') rather than a strategy.
bool names_plan_file(const std::string& entry);

// The label of an entry (see PlanEntry::label).
std::string plan_label(const std::string& entry);

}  // namespace domino
