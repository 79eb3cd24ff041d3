// multi_plan.cpp: the interleaved launch (see multi_plan.hpp). Outputs, with --out DIR: DIR/<label>.trace.json
// and DIR/<label>.json per plan (the single-plan trace and summary, plus an "interleaved" object: the launch's
// labels, this plan's index and the start of each timed iteration), and DIR/interleave.json.
#include "executor/job/multi_plan.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "executor/job/backends.hpp"
#include "executor/job/interleave_summary.hpp"
#include "executor/job/rank_process.hpp"
#include "executor/runtime/results.hpp"
#include "sim/base/error.hpp"
#include "sim/base/files.hpp"

namespace domino {
namespace {

std::string result_key(const PlanEntry& plan) { return "result." + plan.label; }

// Starts of rank 0's timed iterations, microseconds from the launch's first iteration (any plan).
std::vector<double> timed_starts(const RankResult& rank0, double origin_us) {
  std::vector<double> out;
  for (const IterationRecord& it : rank0.iterations)
    if (it.timed) out.push_back(it.start_us - origin_us);
  return out;
}

void print_plan_line(const PlanEntry& plan, const nlohmann::json& row, const std::string& baseline) {
  const auto& t = row["iteration_time_us"];
  const auto& r = row["ratio_to_baseline"];
  std::printf(
      "%-24s %s: iteration %.3f ms mean, %.3f median (p10 %.3f, p90 %.3f); per round %.3fx %s (p10 %.3f, p90 "
      "%.3f)\n",
      plan.label.c_str(), plan.job.plan.strategy.c_str(), t["mean"].get<double>() / 1000.0,
      t["median"].get<double>() / 1000.0, t["p10"].get<double>() / 1000.0, t["p90"].get<double>() / 1000.0,
      r["median"].get<double>(), baseline.c_str(), r["p10"].get<double>(), r["p90"].get<double>());
}

// Rank 0: every plan's ranks' reports -> per-plan trace and summary, the combined summary, the printed lines.
void write_outputs(const ExecOptions& o, const PlanSet& set, const std::vector<std::vector<RankResult>>& results) {
  double origin = 0;
  bool first = true;
  for (const auto& ranks : results)
    for (const IterationRecord& it : ranks[0].iterations) {
      origin = first ? it.start_us : std::min(origin, it.start_us);
      first = false;
    }
  nlohmann::json labels = nlohmann::json::array();
  for (const PlanEntry& p : set.plans) labels.push_back(p.label);
  const std::string& dir = o.run.out_dir;
  if (!dir.empty()) std::filesystem::create_directories(dir);
  std::vector<PlanTimes> times;
  for (size_t i = 0; i < set.plans.size(); ++i) {
    const PlanEntry& plan = set.plans[i];
    const RunSummary summary = summarize(results[i], plan.job.schedule, o.run.trace_iterations);
    nlohmann::json meta = run_meta(o);
    meta["interleaved"] = {{"plans", labels}, {"index", i}, {"label", plan.label}, {"source", plan.source},
                           {"iteration_start_us", timed_starts(results[i][0], origin)}};
    if (!dir.empty()) {
      write_trace(dir + "/" + plan.label + ".trace.json", plan.job.schedule, summary.timeline, meta);
      write_file_atomic(dir + "/" + plan.label + ".json", summary_json(summary, plan.job.schedule, meta).dump(2) + "\n");
    }
    times.push_back({plan.label, plan.job.plan.strategy, summary.timeline.iteration_samples_us,
                     summary.mean_us, summary.median_us, summary.p10_us, summary.p90_us});
  }
  const ModelSpec& model = set.plans[0].job.model;
  nlohmann::json head = run_meta(o);
  head["model"] = model.name;
  head["tp"] = model.tp;
  head["warmup"] = o.run.warmup;
  head["visit_warmup"] = o.run.visit_warmup;
  const nlohmann::json combined = interleave_summary(times, set.baseline, head);
  if (!dir.empty()) write_file_atomic(dir + "/interleave.json", combined.dump(2) + "\n");
  if (o.run.quiet) return;
  std::printf("%s tp %d: %zu plans interleaved over %d rounds (+%d warm-up)\n", model.name.c_str(), model.tp,
              set.plans.size(), o.run.iters, o.run.warmup);
  for (size_t i = 0; i < set.plans.size(); ++i)
    print_plan_line(set.plans[i], combined["plans"][i], set.plans[set.baseline].label);
  std::fflush(stdout);
}

void print_iteration(const PlanEntry& plan, int round, const IterationRecord& rec) {
  std::printf("round %3d%s  %-24s loss %.6f  time %.3f ms\n", round, rec.timed ? "          " : " (warm-up)",
              plan.label.c_str(), double(rec.loss), rec.time_us / 1000.0);
  std::fflush(stdout);
}

}  // namespace

void run_several_plans_rank(const ExecOptions& o, const PlanSet& set, const CommConfig& config) {
  GlooComm comm(config);
  const int rank = comm.rank();
  // Declared before the runners: a runner's stream drivers belong to its backend, so runners go first.
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<std::unique_ptr<IterationRunner>> runners;
  std::vector<RankResult> results(set.plans.size());
  std::vector<const Schedule*> schedules;
  for (const PlanEntry& plan : set.plans) schedules.push_back(&plan.job.schedule);
  make_backend(o.backend)->reserve_for_plans(schedules);  // before any plan takes memory of its own
  for (size_t i = 0; i < set.plans.size(); ++i) {
    const Job& job = set.plans[i].job;
    backends.push_back(prepared_backend(o, job, comm));
    runners.push_back(std::make_unique<IterationRunner>(job.schedule, *backends.back(), &comm, rank,
                                                        runner_options(o.run, *backends.back())));
    results[i].rank = rank;
    results[i].clock_domain = steady_clock_domain();
    results[i].peak_memory_bytes = backends.back()->peak_memory_bytes();
    results[i].huge_page_bytes = backends.back()->huge_page_bytes();
  }
  const bool report = rank == 0 && !o.run.quiet;
  // Round r starts from the (r mod n)-th plan: every plan takes every place of a round equally often, so that
  // what a place brings (the plan that ran just before, the round's barrier) does not land on one plan.
  const size_t n = set.plans.size();
  for (int round = 0; round < o.run.warmup + o.run.iters; ++round) {
    const bool timed = round >= o.run.warmup;
    for (size_t place = 0; place < n; ++place) {
      const size_t i = (place + size_t(round)) % n;
      for (int visit = 0; timed && visit < o.run.visit_warmup; ++visit) {
        IterationRecord warm = runners[i]->run_next(false);
        if (report) print_iteration(set.plans[i], round, warm);
        results[i].iterations.push_back(std::move(warm));
      }
      IterationRecord rec = runners[i]->run_next(timed);
      if (report) print_iteration(set.plans[i], round, rec);
      results[i].iterations.push_back(std::move(rec));
    }
  }
  runners.clear();
  for (size_t i = 0; i < set.plans.size(); ++i) publish_rank_result(comm, result_key(set.plans[i]), results[i]);
  if (rank != 0) return;
  std::vector<std::vector<RankResult>> all;
  for (const PlanEntry& plan : set.plans) all.push_back(gather_rank_results(comm, result_key(plan)));
  write_outputs(o, set, all);
}

}  // namespace domino
