// tuner_test.cpp: the tuner's promises: never slower than a baseline, deterministic plans, the memory
// limit, several TP degrees, the JSON keys and plan provenance, and the CLI's exit codes.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/base/error.hpp"
#include "sim/base/files.hpp"
#include "tests/tuner/tuner_test_util.hpp"
#include "tuner/tune_report.hpp"

namespace domino {
namespace {

TuneOptions quiet_options() {
  TuneOptions o;
  o.progress = false;
  return o;
}

class ShippedH100 : public ::testing::TestWithParam<std::string> {};

// With the baselines kept out of the search space and the candidate pool (where they would make this hold by
// construction), the search itself must still find a plan at least as fast as each of them.
TEST_P(ShippedH100, TunedPlanIsNeverSlowerThanAnyBaseline) {
  const ModelSpec m = test::shipped_model(GetParam(), load_model(test::repo_path("configs/models/" + GetParam() + ".yaml")).layers, 8);
  const CostModel cost = test::shipped_cost("dgx-h100");
  TuneOptions o = quiet_options();
  o.search.include_baselines = false;
  const TuneResult r = tune(m, {}, cost, o);
  const TpTuning& t = r.best_tuning();
  ASSERT_GE(t.baselines.size(), 3u);
  for (const EvaluatedPlan& b : t.baselines) {
    if (!b.plan.comm_enabled) {
      // The no-comm bound is a bound: no plan with communication beats it.
      EXPECT_GE(r.best().figures.iteration_us, b.figures.iteration_us * (1 - 1e-12));
      continue;
    }
    EXPECT_LE(r.best().figures.iteration_us, b.figures.iteration_us) << b.label;
  }
  // The table lists K plans, fastest first.
  for (size_t i = 1; i < t.top.size(); ++i) EXPECT_LE(t.top[i - 1].figures.iteration_us, t.top[i].figures.iteration_us);
}

INSTANTIATE_TEST_SUITE_P(Models, ShippedH100, ::testing::Values("gpt3-13b", "llama2-70b"),
                         [](const auto& info) { return std::string(info.param == "gpt3-13b" ? "gpt3_13b" : "llama2_70b"); });

TEST(Tuner, SameInputGivesByteIdenticalPlan) {
  const ModelSpec m = default_model();
  const CostModel cost = test::shipped_cost("cpu-dev");
  const TuneOptions o = quiet_options();
  const std::string a = plan_to_yaml(tuned_plan(tune(m, {}, cost, o), o));
  const std::string b = plan_to_yaml(tuned_plan(tune(m, {}, cost, o), o));
  EXPECT_EQ(a, b);
  EXPECT_NE(a.find("domino-tune"), std::string::npos);
}

TEST(Tuner, PlanRecordsProvenanceAndRoundTrips) {
  const ModelSpec m = default_model();
  const CostModel cost = test::shipped_cost("cpu-dev");
  const TuneOptions o = quiet_options();
  const TuneResult r = tune(m, {}, cost, o);
  const Plan plan = tuned_plan(r, o);
  EXPECT_EQ(plan.strategy, "tuned");
  EXPECT_EQ(plan.profile, cost.profile().name);
  for (const char* key : {"tuner", "profile", "search_space", "predicted_iteration_us",
                          "baseline_megatron-sync_iteration_us", "baseline_no-comm_iteration_us"})
    EXPECT_TRUE(plan.provenance.count(key)) << key;
  EXPECT_EQ(std::stod(plan.provenance.at("predicted_iteration_us")), std::stod(fmt::format("{:.3f}", r.best().figures.iteration_us)));
  const TempDir dir("domino-tuner-test");
  const std::string path = dir.path() + "/tuned_plan.yaml";
  save_plan(plan, path);
  const Plan back = load_plan(path, m);
  EXPECT_EQ(back.layers, plan.layers);
  EXPECT_DOUBLE_EQ(simulate_plan(m, back, cost).iteration_us, r.best().figures.iteration_us);
}

TEST(Tuner, JsonSummaryHasTheStableKeys) {
  const ModelSpec m = default_model();
  const CostModel cost = test::shipped_cost("cpu-dev");
  TuneOptions o = quiet_options();
  o.top_k = 3;
  const TuneResult r = tune(m, {}, cost, o);
  const nlohmann::json j = summary_json(r, o);
  EXPECT_DOUBLE_EQ(j["best"]["iteration_time_us"].get<double>(), r.best().figures.iteration_us);
  EXPECT_GE(j["best"]["speedup_vs_megatron_sync"].get<double>(), 1.0);
  for (const char* name : {"megatron-sync", "megatron-async", "domino-ds", "domino-deep", "no-comm"})
    EXPECT_TRUE(j["baselines"][name]["iteration_time_us"].is_number()) << name;
  EXPECT_LE(j["top"].size(), 3u);
  EXPECT_GT(j["search"]["evaluated"].get<double>(), 0);
  EXPECT_TRUE(j["search"]["seconds"].is_number());
  EXPECT_TRUE(j["search"]["space_size_log10"].is_number());
  // Which search ran, and what the full one needs (the screened search is the fallback beyond its budget).
  EXPECT_EQ(j["search"]["mode"], r.per_tp.front().stats.screened ? "screened" : "full");
  EXPECT_EQ(j["search"]["full_search_probes"].get<long>(), r.per_tp.front().stats.full_search_probes);
}

TEST(Tuner, MemoryLimitExcludesPlansAndExplainsWhenNothingFits) {
  const ModelSpec m = default_model();
  const CostModel cost = test::shipped_cost("cpu-dev");
  TuneOptions o = quiet_options();
  o.search.include_baselines = false;  // the search's own plans, not the baselines' handed back
  const TuneResult free_run = tune(m, {}, cost, o);
  int64_t smallest = free_run.best_tuning().smallest.figures.peak_memory_bytes;
  for (const EvaluatedPlan& b : free_run.best_tuning().baselines) smallest = std::min(smallest, b.figures.peak_memory_bytes);
  o.mem_limit_gib = double(smallest) / kGiB * 0.5;
  try {
    tune(m, {}, cost, o);
    FAIL() << "expected BadInput";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find("no plan fits"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("the smallest needs"), std::string::npos) << e.what();
  }
  // A limit just above megatron-sync's peak: everything listed fits.
  o.mem_limit_gib = double(free_run.best_tuning().baseline("megatron-sync")->figures.peak_memory_bytes) / kGiB;
  const TuneResult limited = tune(m, {}, cost, o);
  for (const EvaluatedPlan& e : limited.best_tuning().top)
    EXPECT_LE(double(e.figures.peak_memory_bytes), o.mem_limit_gib * kGiB) << e.label;
  for (const EvaluatedPlan& b : limited.best_tuning().baselines) {
    if (b.plan.comm_enabled && b.fits) {
      EXPECT_LE(limited.best().figures.iteration_us, b.figures.iteration_us) << b.label;
    }
  }
}

TEST(Tuner, MemoryLimitBetweenBaselineAndFastestStillBeatsTheBaselines) {
  // GPT-3 13B at TP 8: the fastest plans mix buffer shapes at the last layer and need a little more
  // memory than the single-shape plans; a limit between the two must still yield a plan at least as
  // fast as every baseline.
  const ModelSpec m = test::shipped_model("gpt3-13b", 40, 8);
  const CostModel cost = test::shipped_cost("dgx-h100");
  TuneOptions o = quiet_options();
  o.search.include_baselines = false;  // the search's own plans, not the baselines' handed back
  const TuneResult free_run = tune(m, {}, cost, o);
  const int64_t sync_peak = free_run.best_tuning().baseline("megatron-sync")->figures.peak_memory_bytes;
  o.mem_limit_gib = double(sync_peak) / kGiB;
  const TuneResult r = tune(m, {}, cost, o);
  EXPECT_LE(r.best().figures.peak_memory_bytes, sync_peak);
  for (const EvaluatedPlan& b : r.best_tuning().baselines) {
    if (b.plan.comm_enabled) {
      EXPECT_LE(r.best().figures.iteration_us, b.figures.iteration_us) << b.label;
    }
  }
}

// The fastest named strategy that communicates, or null.
const EvaluatedPlan* fastest_communicating_strategy(const TpTuning& t) {
  const EvaluatedPlan* fastest = nullptr;
  for (const EvaluatedPlan& b : t.baselines)
    if (b.plan.comm_enabled && (!fastest || b.figures.iteration_us < fastest->figures.iteration_us))
      fastest = &b;
  return fastest;
}

// How much longer than the run's best plan `plan` is predicted to take, in percent.
double behind_best_pct(const TuneResult& run, const EvaluatedPlan& plan) {
  return 100 * (plan.figures.iteration_us / run.best().figures.iteration_us - 1);
}

// --min-gain: the search's best stands only when it beats the fastest named strategy by the margin; below it
// that strategy heads the list, says why, and is the plan written; below megatron-async's lag,
// megatron-async. The margin is read off a first run, so the test holds for whatever the profile predicts.
TEST(Tuner, MinGainKeepsTheFastestNamedStrategyWithinTheMargin) {
  const ModelSpec m = default_model();
  const CostModel cost = test::shipped_cost("cpu-dev-2gbps");
  TuneOptions o = quiet_options();
  o.sequence_parallel = SpSearch::Off;
  const TuneResult free_run = tune(m, {}, cost, o);
  const TpTuning& t = free_run.best_tuning();
  const EvaluatedPlan* fastest = fastest_communicating_strategy(t);
  ASSERT_NE(fastest, nullptr);
  const double gain_pct = behind_best_pct(free_run, *fastest);
  ASSERT_GT(gain_pct, 0.1)
      << "the default model's tuned plan must beat its strategies for this test to say anything";

  o.min_gain_pct = gain_pct * 0.5;  // the gain clears it: the search's answer stands
  const TuneResult below = tune(m, {}, cost, o);
  EXPECT_EQ(below.best().label, "tuned #1");
  EXPECT_TRUE(below.best_tuning().kept_strategy_note.empty());

  o.min_gain_pct = gain_pct * 2;  // it does not: the strategy is the answer
  const TuneResult kept = tune(m, {}, cost, o);
  EXPECT_EQ(kept.best().label, fastest->label);
  EXPECT_EQ(kept.best().plan.layers, fastest->plan.layers);
  EXPECT_NE(kept.best_tuning().kept_strategy_note.find(fastest->label + " kept"), std::string::npos);
  EXPECT_EQ(kept.best_tuning().top.at(1).label, "tuned #1");  // the search's plans still listed
  const Plan written = tuned_plan(kept, o);
  EXPECT_EQ(written.layers, fastest->plan.layers);
  EXPECT_EQ(written.provenance.at("min_gain_pct"), fmt::format("{:g}", o.min_gain_pct));
  EXPECT_TRUE(summary_json(kept, o)["kept_strategy"].is_string());

  // A margin above megatron-async's lag behind the best: Megatron-LM's default is the answer.
  const EvaluatedPlan* megatron = t.baseline("megatron-async");
  ASSERT_NE(megatron, nullptr);
  const double megatron_lag_pct = behind_best_pct(free_run, *megatron);
  ASSERT_GT(megatron_lag_pct, gain_pct * 2) << "megatron-async must lag further than the fastest strategy";
  o.min_gain_pct = std::min(99.0, megatron_lag_pct * 1.5);
  const TuneResult kept_default = tune(m, {}, cost, o);
  EXPECT_EQ(kept_default.best().label, "megatron-async");
  EXPECT_NE(kept_default.best_tuning().kept_strategy_note.find("megatron-async kept: tuned #1"),
            std::string::npos)
      << kept_default.best_tuning().kept_strategy_note;

  o.min_gain_pct = 100;
  EXPECT_THROW(tune(m, {}, cost, o), Error);
}

// Without a margin, a searched plan predicted to take exactly the time of the fastest named strategy does not
// replace it: the strategy heads the answer under its own name. On the shipped CPU profile the default
// model's search ties megatron-async (its own plans include per-layer variants with an overlap mode that
// changes nothing at one slice).
TEST(Tuner, ATieKeepsTheNamedStrategy) {
  const ModelSpec m = default_model();
  const CostModel cost = test::shipped_cost("cpu-dev");
  TuneOptions o = quiet_options();
  o.sequence_parallel = SpSearch::Off;
  o.search.include_baselines = false;  // the strategies are no candidates: the search's answer is its own
  const TuneResult r = tune(m, {}, cost, o);
  const TpTuning& t = r.best_tuning();
  const EvaluatedPlan* fastest = fastest_communicating_strategy(t);
  ASSERT_NE(fastest, nullptr);
  ASSERT_GE(t.top.size(), 2u);
  const EvaluatedPlan& searched = t.top.at(1);  // the search's first plan after the strategy
  if (searched.figures.iteration_us != fastest->figures.iteration_us)
    GTEST_SKIP() << "this profile's search no longer ties a named strategy (" << searched.label << " "
                 << searched.figures.iteration_us << " us, " << fastest->label << " "
                 << fastest->figures.iteration_us << " us)";
  EXPECT_EQ(r.best().label, fastest->label);
  EXPECT_EQ(r.best().plan.layers, fastest->plan.layers);
}

TEST(Tuner, SearchesSeveralTpDegreesAndKeepsTheMostTokensPerGpu) {
  const ModelSpec m = default_model();
  const CostModel cost = test::shipped_cost("cpu-dev");
  const TuneResult r = tune(m, {1, 2, 4}, cost, quiet_options());
  ASSERT_EQ(r.per_tp.size(), 3u);
  for (const TpTuning& t : r.per_tp) {
    EXPECT_EQ(t.model.tp, t.top.front().plan.tp);
    EXPECT_GE(r.best().throughput.tokens_per_s_per_gpu, t.top.front().throughput.tokens_per_s_per_gpu);
  }
  EXPECT_THROW(tune(m, {3}, cost, quiet_options()), Error);  // 8 heads do not split over 3 ranks
}

// ---- the command line ----

struct CliRun {
  int code;
  std::string out, err;
};

// Each call captures into its own folder: ctest runs the tests of this file in parallel processes.
CliRun run_cli(const std::string& args) {
  const std::string bin = std::string(DOMINO_BIN_DIR) + "/domino-tune";
  const TempDir capture("domino-tune-cli");
  const std::string dir = capture.path();
  const std::string cmd = "cd " + std::string(DOMINO_TEST_DATA) + "/.. && " + bin + " " + args + " >" + dir +
                          "/h4_cli.out 2>" + dir + "/h4_cli.err";
  const int status = std::system(cmd.c_str());
  auto slurp = [](const std::string& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  };
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir + "/h4_cli.out"), slurp(dir + "/h4_cli.err")};
}

bool have_cli() { return std::filesystem::exists(std::string(DOMINO_BIN_DIR) + "/domino-tune"); }

// --recompute auto takes the cheapest mode whose plans fit --mem-gb: with a limit between the smallest plan's
// memory without recomputation and with selective recomputation (both from the library), selective.
TEST(TuneCli, RecomputeAutoTakesTheCheapestModeThatFits) {
  if (!have_cli()) GTEST_SKIP() << "domino-tune not built";
  ModelSpec m = test::shipped_model("gpt3-2.7b", 32, 8);
  const CostModel cost = test::shipped_cost("dgx-h100");
  const double none = double(tune(m, {}, cost, quiet_options()).per_tp[0].smallest.figures.peak_memory_bytes);
  m.training.recompute = Recompute::Selective;
  const double sel = double(tune(m, {}, cost, quiet_options()).per_tp[0].smallest.figures.peak_memory_bytes);
  ASSERT_LT(sel, none);
  const TempDir dir("domino-tune-cli-auto");
  const std::string json = dir.path() + "/auto.json";
  const CliRun r = run_cli(fmt::format("gpt3-2.7b --tp 8 --profile dgx-h100 --quiet --recompute auto --mem-gb {} --json {}",
                                       (none + sel) / 2 / kGiB, json));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("recompute auto: selective (the cheapest mode that fits; none: the smallest plan needs"),
            std::string::npos)
      << r.out;
  std::ifstream f(json);
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_NE(text.str().find("\"recompute\": \"selective\""), std::string::npos);
}

TEST(TuneCli, WritesPlanTraceAndJsonDeterministically) {
  if (!have_cli()) GTEST_SKIP() << "domino-tune not built";
  const TempDir outputs("domino-tune-cli-outputs");
  const std::string dir = outputs.path();
  const CliRun a = run_cli("-o " + dir + "/h4_a.yaml --json " + dir + "/h4_a.json --trace " + dir + "/h4_a.trace.json --top 3");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_NE(a.out.find("megatron-sync"), std::string::npos);
  EXPECT_NE(a.out.find("tuned #"), std::string::npos);
  EXPECT_EQ(a.err, "");  // no progress line when stderr is not a terminal
  const CliRun b = run_cli("-o " + dir + "/h4_b.yaml");
  ASSERT_EQ(b.code, 0) << b.err;
  std::ifstream fa(dir + "/h4_a.yaml"), fb(dir + "/h4_b.yaml");
  std::stringstream sa, sb;
  sa << fa.rdbuf();
  sb << fb.rdbuf();
  EXPECT_EQ(sa.str(), sb.str());
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(dir + "/h4_a.json"));
  EXPECT_TRUE(j["best"]["iteration_time_us"].is_number());
  EXPECT_TRUE(std::filesystem::exists(dir + "/h4_a.trace.json"));
}

// Without --min-gain the command line keeps megatron-async unless the best plan leads it by
// kDefaultMinGainPct, then the fastest named strategy unless the search's best leads that one by it;
// --min-gain 0 gives the library's answer. Which the default model gets on this profile is read off the
// library, so the test holds for whatever the profile predicts.
TEST(TuneCli, DefaultMarginKeepsAStrategyUnlessTheBestLeadsItByTheMargin) {
  if (!have_cli()) GTEST_SKIP() << "domino-tune not built";
  TuneOptions o = quiet_options();
  const TuneResult free_run = tune(default_model(), {}, test::shipped_cost("cpu-dev-2gbps"), o);
  const EvaluatedPlan* fastest = fastest_communicating_strategy(free_run.best_tuning());
  ASSERT_NE(fastest, nullptr);
  const double gain_pct = behind_best_pct(free_run, *fastest);

  const TempDir dir("domino-tune-cli-margin");
  const auto summary = [&](const std::string& flags) {
    const std::string json = dir.path() + "/margin.json";
    const CliRun r = run_cli("--profile cpu-dev-2gbps --quiet --json " + json + " " + flags);
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(std::ifstream(json));
  };
  const nlohmann::json by_default = summary("");
  EXPECT_DOUBLE_EQ(by_default["min_gain_pct"].get<double>(), kDefaultMinGainPct);
  const EvaluatedPlan* megatron = free_run.best_tuning().baseline("megatron-async");
  ASSERT_NE(megatron, nullptr);
  const double megatron_lag_pct = behind_best_pct(free_run, *megatron);
  if (megatron_lag_pct < kDefaultMinGainPct) {
    EXPECT_EQ(by_default["best"]["label"], "megatron-async") << "lag " << megatron_lag_pct << " %";
  } else if (gain_pct < kDefaultMinGainPct) {
    EXPECT_EQ(by_default["best"]["label"], fastest->label) << "gain " << gain_pct << " %";
  } else {
    EXPECT_EQ(by_default["best"]["label"], free_run.best().label) << "gain " << gain_pct << " %";
    EXPECT_TRUE(by_default["kept_strategy"].is_null()) << by_default["kept_strategy"];
  }

  const nlohmann::json raw = summary("--min-gain 0");
  EXPECT_DOUBLE_EQ(raw["min_gain_pct"].get<double>(), 0);
  EXPECT_EQ(raw["best"]["label"], free_run.best().label);
  EXPECT_EQ(raw["kept_strategy"].is_string(), !free_run.best_tuning().kept_strategy_note.empty());
}

TEST(TuneCli, BadInputExitsWithTwoAndSaysWhy) {
  if (!have_cli()) GTEST_SKIP() << "domino-tune not built";
  CliRun r = run_cli("--micro-batch 1 --splits batch");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("empty search space"), std::string::npos) << r.err;
  r = run_cli("--mem-gb 0.001");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no plan fits"), std::string::npos) << r.err;
  r = run_cli("--tp 2,x");
  EXPECT_EQ(r.code, 2);
  r = run_cli("--splits rows");
  EXPECT_EQ(r.code, 2);
  r = run_cli("no-such-model");
  EXPECT_EQ(r.code, 2);
  for (const char* flag : {"--dp 0", "--zero 2", "--recompute sometimes"}) {
    r = run_cli(flag);
    EXPECT_EQ(r.code, 2) << flag;
    EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace domino
