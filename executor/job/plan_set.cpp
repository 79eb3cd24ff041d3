// plan_set.cpp: --plans / --plans-file -> one model and a schedule per plan (see plan_set.hpp).
#include "executor/job/plan_set.hpp"

#include <filesystem>
#include <fstream>
#include <set>

#include "sim/base/error.hpp"

namespace domino {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string trimmed(const std::string& line) {
  const size_t hash = line.find('#');
  const std::string text = line.substr(0, hash);
  const size_t first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

std::vector<std::string> all_entries(const JobRequest& request) {
  std::vector<std::string> entries = request.plans;
  if (!request.plans_file.empty()) {
    const std::vector<std::string> listed = read_plans_file(request.plans_file);
    entries.insert(entries.end(), listed.begin(), listed.end());
  }
  if (entries.empty()) throw_bad_input("--plans/--plans-file: no plan given");
  return entries;
}

// The model every plan runs on, with the TP degree of the first plan file unless --tp says otherwise.
ModelSpec shared_model(const JobRequest& request, const std::vector<std::string>& entries, std::string* source) {
  if (!request.target.empty() && !request.model.empty())
    throw_bad_input("with --plans give the model once (positional or --model), not both");
  *source = request.model.empty() ? request.target : request.model;
  ModelOverrides overrides = request.overrides;
  for (const std::string& entry : entries) {
    if (!names_plan_file(entry)) continue;
    const PlanHeader header = read_plan_header(entry);
    if (source->empty()) *source = header.model_name;
    if (!overrides.tp && header.tp > 0) overrides.tp = header.tp;
    break;
  }
  if (source->empty())
    throw_bad_input("--plans: name the model (positional or --model): no plan file names one");
  return load_model(*source, overrides);
}

// A plan file for another model or TP degree is refused here, naming it, before load_plan's own checks
// (which also catch a model of the same name and another shape).
Plan load_plan_of_model(const std::string& path, const ModelSpec& model) {
  const PlanHeader header = read_plan_header(path);
  if (!header.model_name.empty() && header.model_name != model.name)
    throw_bad_input("--plans: " + path + " is a plan for model '" + header.model_name + "', not '" + model.name +
                    "': one launch runs plans of one model");
  if (header.tp > 0 && header.tp != model.tp)
    throw_bad_input("--plans: " + path + " is a plan for tp " + std::to_string(header.tp) + ", not tp " +
                    std::to_string(model.tp) + ": one launch runs plans of one TP degree");
  return load_plan(path, model, false);
}

}  // namespace

bool names_plan_file(const std::string& entry) {
  return ends_with(entry, ".yaml") || ends_with(entry, ".yml") || entry.find('/') != std::string::npos;
}

std::string plan_label(const std::string& entry) {
  if (names_plan_file(entry)) return fs::path(entry).stem().string();
  std::string label = entry;
  for (char& c : label)
    if (c == ':') c = '-';
  return label;
}

std::vector<std::string> read_plans_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw_bad_input(path + ": cannot read the plans file");
  const fs::path folder = fs::path(path).parent_path();
  std::vector<std::string> entries;
  for (std::string line; std::getline(in, line);) {
    const std::string entry = trimmed(line);
    if (entry.empty()) continue;
    const bool relative_file = names_plan_file(entry) && fs::path(entry).is_relative();
    entries.push_back(relative_file ? (folder / entry).lexically_normal().string() : entry);
  }
  return entries;
}

PlanSet resolve_plan_set(const ExecOptions& o) {
  const std::vector<std::string> entries = all_entries(o.job);
  PlanSet set;
  std::string model_source;
  const ModelSpec model = shared_model(o.job, entries, &model_source);
  set.ranks = o.job.ranks > 0 ? o.job.ranks : model.tp;
  if (set.ranks != model.tp)
    throw_bad_input("--ranks " + std::to_string(set.ranks) + " differs from the TP degree " + std::to_string(model.tp) +
                    ": every rank is one tensor-parallel shard (use --tp)");
  std::set<std::string> labels;
  for (const std::string& entry : entries) {
    PlanEntry e;
    e.source = entry;
    e.label = plan_label(entry);
    if (!labels.insert(e.label).second)
      throw_bad_input("--plans: two plans would write the outputs named '" + e.label + "' (" + entry +
                      "): give each plan once, plan files with different names");
    e.job.model_source = model_source;
    e.job.model = model;
    e.job.plan = names_plan_file(entry) ? load_plan_of_model(entry, model) : make_strategy_plan(entry, model);
    e.job.build.optimizer = o.run.optimizer == "sgd" ? OptimizerKind::SgdMomentum : OptimizerKind::Adam;
    e.job.ranks = set.ranks;
    e.job.schedule = build_schedule(model, e.job.plan, e.job.build);
    if (entry == "megatron-async") set.baseline = set.plans.size();
    set.plans.push_back(std::move(e));
  }
  return set;
}

}  // namespace domino
