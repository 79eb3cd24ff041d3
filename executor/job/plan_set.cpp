// plan_set.cpp: --plans / --plans-file -> one model and a schedule per plan (see plan_set.hpp).
#include "executor/job/plan_set.hpp"

#include <filesystem>
#include <fstream>
#include <set>

#include "sim/base/error.hpp"
#include "sim/base/shipped_files.hpp"

namespace domino {
namespace {

namespace fs = std::filesystem;

// An entry is a plan file when it is no bare name: it ends in .yaml/.yml or holds a '/'.
const ShippedFolder kPlanFiles{"plan", "", {".yaml", ".yml"}};

// True when an entry names a plan file rather than a strategy.
bool names_plan_file(const std::string& entry) { return !is_bare_name(entry, kPlanFiles); }

// The label of an entry (see PlanEntry::label).
std::string plan_label(const std::string& entry) {
  if (names_plan_file(entry)) return fs::path(entry).stem().string();
  std::string label = entry;
  for (char& c : label)
    if (c == ':') c = '-';
  return label;
}

std::string trimmed(const std::string& line) {
  const size_t hash = line.find('#');
  const std::string text = line.substr(0, hash);
  const size_t first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

// The entries of a plans file: one plan file or strategy name per line; blank lines and '#' comments are
// skipped; relative plan paths are taken from the file's folder. BadInput when it cannot be read.
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

}  // namespace

PlanSet resolve_plan_set(const ExecOptions& o) {
  const std::vector<std::string> entries = all_entries(o.job);
  PlanSet set;
  std::string model_source;
  const ModelSpec model = shared_model(o.job, entries, &model_source);
  set.ranks = job_ranks(o.job, model);
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
    // A plan made for another model, TP degree or model shape is refused naming its file (--force is no
    // option here: one launch runs plans of one model).
    e.job.plan = names_plan_file(entry) ? load_plan(entry, model, false) : make_strategy_plan(entry, model);
    complete_job(o, &e.job);
    if (entry == "megatron-async") set.baseline = set.plans.size();
    set.plans.push_back(std::move(e));
  }
  return set;
}

std::vector<const Job*> plan_jobs(const PlanSet& set) {
  std::vector<const Job*> jobs;
  for (const PlanEntry& plan : set.plans) jobs.push_back(&plan.job);
  return jobs;
}

}  // namespace domino
