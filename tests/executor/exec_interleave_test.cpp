// exec_interleave_test.cpp: domino-exec --plans end to end on the tiny model: three plans (named strategies,
// and a plan file listed in a --plans-file) in one two-rank launch write one trace per plan with exactly that
// plan's simulator op ids, their timed iterations alternate with the order rotating from round to round
// (B C A, C A B, A B C after one warm-up round), and the combined summary's ratios
// are the per-round quotients of the plans' samples; the same in env mode (torchrun); plans of another model
// or TP degree, and flags that contradict --plans, are refused with exit 2 before anything runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <utility>

#include "exec_test_util.hpp"
#include "sim/ir/schedule.hpp"
#include "sim/model/plan.hpp"
#include "sim/trace/timeline.hpp"

namespace domino {
namespace {

using namespace exectest;

TEST(ExecInterleave, ThreePlansInOneLaunchAlternateAndTraceTheirOwnOps) {
  TempDir dir;
  const ModelSpec m = tiny("tiny-gpt", 2);
  const Plan sync = make_strategy_plan("megatron-sync", m);
  save_plan(sync, dir / "sync.yaml");
  // The plans file: a comment, a strategy name, and a plan file relative to the list's folder.
  std::ofstream(dir / "list.txt") << "# the rest of the plans\nmegatron-async\n\n  sync.yaml  # a plan file\n";
  const Outcome o = run({model_file("tiny-gpt"), "--plans", "domino-ds", "--plans-file", dir / "list.txt",
                         "--iters", "3", "--warmup", "1", "--quiet", "--out", dir / "out"},
                        dir / "log");
  ASSERT_EQ(o.exit_code, 0) << o.output;

  const std::vector<std::pair<std::string, Plan>> plans{
      {"domino-ds", make_strategy_plan("domino-ds", m)}, {"megatron-async", make_strategy_plan("megatron-async", m)},
      {"sync", sync}};
  // The sliced plan's op ids differ from the others': a trace written for the wrong plan would fail.
  ASSERT_NE(schedule_ids(build_schedule(m, plans[0].second)), schedule_ids(build_schedule(m, plans[1].second)));
  std::vector<std::pair<double, size_t>> starts;  // (iteration start, plan index) of every timed iteration
  std::vector<std::vector<double>> samples;
  for (size_t i = 0; i < plans.size(); ++i) {
    const std::string stem = dir / ("out/" + plans[i].first);
    expect_trace_of(stem + ".trace.json", build_schedule(m, plans[i].second), 2);
    const nlohmann::json s = read_json(stem + ".json");
    EXPECT_EQ(s["strategy"], plans[i].second.strategy);
    EXPECT_EQ(s["interleaved"]["index"], i);
    const auto& t = s["interleaved"]["iteration_start_us"];
    ASSERT_EQ(t.size(), 3u) << s.dump();
    for (const auto& v : t) starts.push_back({v.get<double>(), i});
    samples.push_back(s["iteration_time_us"]["samples"].get<std::vector<double>>());
    ASSERT_EQ(samples.back().size(), 3u);
    // The trace carries the same interleaving record as the summary.
    EXPECT_EQ(read_trace(stem + ".trace.json").meta["interleaved"]["iteration_start_us"], t);
  }
  std::sort(starts.begin(), starts.end());
  // Round r (the warm-up round is round 0) starts from plan r mod 3: B C A, C A B, A B C; each plan takes
  // each place of a round once.
  std::set<std::pair<size_t, size_t>> plan_places;
  for (size_t k = 0; k < starts.size(); ++k) {
    const size_t round = 1 + k / 3, place = k % 3;
    EXPECT_EQ(starts[k].second, (place + round) % 3) << "timed iteration " << k;
    plan_places.insert({starts[k].second, place});
  }
  EXPECT_EQ(plan_places.size(), 9u);

  const nlohmann::json combined = read_json(dir / "out/interleave.json");
  EXPECT_EQ(combined["baseline"], "megatron-async");
  EXPECT_EQ(combined["model"], "tiny-gpt");
  EXPECT_EQ(combined["rounds"], 3);
  ASSERT_EQ(combined["plans"].size(), 3u);
  for (size_t i = 0; i < plans.size(); ++i) {
    const auto& row = combined["plans"][i];
    EXPECT_EQ(row["label"], plans[i].first);
    const auto per_round = row["ratio_to_baseline"]["per_round"].get<std::vector<double>>();
    ASSERT_EQ(per_round.size(), 3u);
    for (size_t k = 0; k < 3; ++k) EXPECT_DOUBLE_EQ(per_round[k], samples[i][k] / samples[1][k]) << i << " " << k;
  }
}

// --visit-warmup 1: in every timed round each plan runs one untimed iteration right before its timed one (the
// order still rotating), so that each timed iteration follows one of its own plan; the summaries count them
// as untimed, and the launch's summary records the setting. Without --plans, or negative, it is refused.
TEST(ExecInterleave, AVisitWarmupRunsEachPlanRightBeforeItsTimedIteration) {
  TempDir dir;
  const std::string m = model_file("tiny-gpt");
  const Outcome o = run({m, "--plans", "megatron-async", "domino-ds", "--iters", "2", "--warmup", "0",
                         "--visit-warmup", "1", "--out", dir / "out"},
                        dir / "log");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  std::vector<std::string> order;  // "plan" or "plan (warm-up)", as rank 0 printed them
  std::istringstream lines(o.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("round", 0) != 0) continue;
    std::istringstream words(line);  // round N [(warm-up)] LABEL loss ...
    std::string round, number, label;
    words >> round >> number >> label;
    const bool warm = label == "(warm-up)";
    if (warm) words >> label;
    order.push_back(label + (warm ? " (warm-up)" : ""));
  }
  const std::vector<std::string> want = {
      "megatron-async (warm-up)", "megatron-async", "domino-ds (warm-up)",      "domino-ds",
      "domino-ds (warm-up)",      "domino-ds",      "megatron-async (warm-up)", "megatron-async"};
  EXPECT_EQ(order, want) << o.output;
  for (const char* plan : {"megatron-async", "domino-ds"}) {
    const nlohmann::json s = read_json(dir / ("out/" + std::string(plan) + ".json"));
    EXPECT_EQ(s["iteration_time_us"]["samples"].size(), 2u) << plan;
    EXPECT_EQ(s["warmup"], 2) << plan;
  }
  EXPECT_EQ(read_json(dir / "out/interleave.json")["visit_warmup"], 1);
  EXPECT_EQ(run({m, "--strategy", "domino-ds", "--visit-warmup", "1"}, dir / "log").exit_code, 2);
  EXPECT_EQ(run({m, "--plans", "domino-ds", "megatron-async", "--visit-warmup", "-1"}, dir / "log").exit_code,
            2);
}

TEST(ExecInterleave, EnvModeRunsThePlansInterleaved) {
  TempDir dir;
  run_env_mode_ranks({model_file("tiny-gpt"), "--plans", "megatron-sync", "domino-ds", "--iters", "2", "--warmup", "0",
                      "--quiet", "--out", dir / "out"},
                     dir);
  const nlohmann::json combined = read_json(dir / "out/interleave.json");
  EXPECT_EQ(combined["baseline"], "megatron-sync");  // no megatron-async: the first plan
  ASSERT_EQ(combined["plans"].size(), 2u);
  EXPECT_EQ(combined["plans"][1]["label"], "domino-ds");
  EXPECT_EQ(read_json(dir / "out/domino-ds.json")["peak_memory_bytes"].size(), 2u);
  EXPECT_EQ(read_json(dir / "out/domino-ds.json")["huge_page_bytes"].size(), 2u);
}

TEST(ExecInterleave, PlanForAnotherModelIsRefusedNamingIt) {
  TempDir dir;
  save_plan(make_strategy_plan("domino-deep", tiny("tiny-llama", 2)), dir / "llama.yaml");
  const Outcome o = run({model_file("tiny-gpt"), "--plans", "megatron-async", dir / "llama.yaml"}, dir / "log");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find(dir / "llama.yaml"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("tiny-llama"), std::string::npos) << o.output;
}

TEST(ExecInterleave, PlanForAnotherTpIsRefusedNamingIt) {
  TempDir dir;
  save_plan(make_strategy_plan("domino-ds", tiny("tiny-gpt", 4)), dir / "tp4.yaml");
  save_plan(make_strategy_plan("domino-ds", tiny("tiny-gpt", 2)), dir / "tp2.yaml");
  // The first plan file sets the TP degree (2); the second was made for 4.
  const Outcome o = run({"--model", model_file("tiny-gpt"), "--plans", dir / "tp2.yaml", dir / "tp4.yaml"}, dir / "log");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find(dir / "tp4.yaml"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("tp 4"), std::string::npos) << o.output;
}

TEST(ExecInterleave, FlagsThatContradictPlansAreRefused) {
  TempDir dir;
  const std::string m = model_file("tiny-gpt");
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--trace", dir / "t.json"}, {"--strategy", "domino-ds"}, {"--check"}}) {
    std::vector<std::string> args{m, "--plans", "domino-ds", "megatron-async"};
    args.insert(args.end(), extra.begin(), extra.end());
    const Outcome o = run(args, dir / "log");
    EXPECT_EQ(o.exit_code, 2) << extra[0] << ": " << o.output;
    EXPECT_NE(o.output.find(extra[0]), std::string::npos) << o.output;
  }
  // Two entries with one label would overwrite each other's outputs.
  const Outcome dup = run({m, "--plans", "domino-ds", "domino-ds"}, dir / "log");
  EXPECT_EQ(dup.exit_code, 2) << dup.output;
  EXPECT_NE(dup.output.find("'domino-ds'"), std::string::npos) << dup.output;
  // --out belongs to --plans.
  EXPECT_EQ(run({m, "--strategy", "domino-ds", "--out", dir / "o"}, dir / "log").exit_code, 2);
}

}  // namespace
}  // namespace domino
