// fidelity_short_test.cpp: scripts/fidelity-sweep end to end on a tiny shape (4 plans, loopback, 2 timed
// iterations), and the table arithmetic of scripts/fidelity-table.py on hand-made rows. The accuracy targets
// (MAPE, tau, regret) are NOT asserted: timings on a shared machine vary too much; only that the sweep runs
// and writes a well-formed table with finite figures.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const fs::path kScripts = fs::path(DOMINO_TEST_DATA) / ".." / "scripts";

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int run(const std::string& cmd, const fs::path& log) {
  const int status = std::system((cmd + " > " + log.string() + " 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Hand-made rows for the table script: CONFIG/rows.tsv, one prediction per plan and one measurement file
// per round (PLAN.json for a single round, PLAN.rN.json otherwise).
struct KnownRow {
  std::string plan;
  double predicted_us;
  std::vector<std::vector<double>> rounds_us;  // samples of each round
};

void write_rows(const fs::path& cfg, const std::vector<KnownRow>& rows) {
  fs::create_directories(cfg);
  std::ofstream tsv(cfg / "rows.tsv");
  for (const KnownRow& r : rows) {
    const fs::path pred = cfg / (r.plan + ".pred.json");
    std::ofstream(pred) << nlohmann::json{{"iteration_time_us", r.predicted_us}, {"exposed_comm_us", 0}}.dump();
    std::string meas;
    for (size_t k = 0; k < r.rounds_us.size(); ++k) {
      const fs::path m = cfg / (r.plan + (r.rounds_us.size() == 1 ? "" : ".r" + std::to_string(k + 1)) + ".json");
      std::ofstream(m) << nlohmann::json{{"iteration_time_us", {{"samples", r.rounds_us[k]}}}}.dump();
      if (!meas.empty()) meas += ',';
      meas += m.string();
    }
    tsv << r.plan << '\t' << pred.string() << '\t' << meas << "\t\tok\n";
  }
}

// The rows of one interleaved launch (sample k of every plan from round k), as the sweep's config says.
void write_interleaved_launch(const fs::path& cfg, const std::vector<KnownRow>& rows) {
  write_rows(cfg, rows);
  std::ofstream(cfg / "config.json") << nlohmann::json{{"model", "m"}, {"interleaved", true}}.dump();
}

// A single-round plan's measurement with each rank's compute time per iteration (CONFIG/PLAN.json).
void write_compute_busy(const fs::path& cfg, const std::string& plan, const std::vector<double>& samples,
                        const std::vector<std::vector<double>>& busy) {
  std::ofstream(cfg / (plan + ".json"))
      << nlohmann::json{{"iteration_time_us", {{"samples", samples}}}, {"compute_busy_us", busy}}.dump();
}

// A predicted trace beside a hand-made row's prediction (CONFIG/PLAN.pred.trace.json): one op per duration,
// back to back on one stream.
void write_predicted_trace(const fs::path& cfg, const std::string& plan, const std::vector<double>& op_us) {
  nlohmann::json events = nlohmann::json::array();
  double ts = 0;
  for (size_t i = 0; i < op_us.size(); ++i) {
    events.push_back({{"name", "op" + std::to_string(i)},
                      {"ph", "X"},
                      {"pid", 0},
                      {"tid", 0},
                      {"ts", ts},
                      {"dur", op_us[i]}});
    ts += op_us[i];
  }
  std::ofstream(cfg / (plan + ".pred.trace.json")) << nlohmann::json{{"traceEvents", events}}.dump();
}

class FidelitySweep : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v python3 > /dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not installed";
    dir = fs::temp_directory_path() / ("domino_fidelity_" + std::to_string(::getpid()) + "_" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override {
    if (!dir.empty() && !HasFailure()) fs::remove_all(dir);
  }
  // Runs the table script on dir/cfg; returns that configuration's JSON.
  nlohmann::json table() {
    const int rc = run("python3 " + (kScripts / "fidelity-table.py").string() + " table " + dir.string() + " cfg",
                       dir / "log");
    EXPECT_EQ(rc, 0) << slurp(dir / "log");
    return nlohmann::json::parse(slurp(dir / "fidelity.json"))["configurations"]["cfg"];
  }
  // The tools the sweep calls, all built: "" ; otherwise the first missing one.
  static std::string missing_tool() {
    for (const char* tool : {"domino-sim", "domino-tune", "domino-exec", "domino-compare", "domino-profile"})
      if (!fs::exists(fs::path(DOMINO_BIN_DIR) / tool)) return (fs::path(DOMINO_BIN_DIR) / tool).string();
    return "";
  }
  // The command line of the sweep with these arguments.
  static std::string sweep_with(const std::string& args) {
    return "bash " + (kScripts / "fidelity-sweep").string() + " " + args;
  }
  // The short sweep on the tiny cpu-gpt shape over loopback, two rounds, with `flags` added.
  static std::string short_sweep(const std::string& flags) {
    return sweep_with(
        "--short --models cpu-gpt --links 0 --seq-len 32 --micro-batch 4 --iters 2 --warmup 1 --build " +
        fs::path(DOMINO_BIN_DIR).parent_path().string() + " " + flags);
  }
  fs::path dir;
};

TEST_F(FidelitySweep, ShortSweepWritesAWellFormedTable) {
  if (const std::string tool = missing_tool(); !tool.empty()) GTEST_SKIP() << tool << " not built";
  const fs::path out = dir / "out";
  const int rc = run(short_sweep("--out " + out.string()), dir / "log");
  ASSERT_EQ(rc, 0) << slurp(dir / "log");

  const auto doc = nlohmann::json::parse(slurp(out / "fidelity.json"));
  ASSERT_TRUE(doc["configurations"].contains("cpu-gpt-loopback")) << doc.dump(1);
  const auto& config = doc["configurations"]["cpu-gpt-loopback"];
  const auto& rows = config["rows"];
  ASSERT_EQ(rows.size(), 4u);
  const std::string md = slurp(out / "fidelity.md");
  EXPECT_NE(md.find("| plan | predicted ms | measured ms (mean) | error % |"), std::string::npos) << md;
  for (const auto& row : rows) {
    const std::string plan = row["plan"];
    EXPECT_EQ(row["status"], "ok") << plan;
    ASSERT_TRUE(row.contains("error_pct")) << row.dump();
    EXPECT_GT(row["predicted_ms"].get<double>(), 0) << plan;
    EXPECT_GT(row["measured_ms"].get<double>(), 0) << plan;
    EXPECT_EQ(row["measured_samples_ms"].size(), 2u) << plan;  // --iters 2: two interleaved rounds
    // A plan's measured time is its mean iteration; with two samples the median is the same.
    const double mean =
        (row["measured_samples_ms"][0].get<double>() + row["measured_samples_ms"][1].get<double>()) / 2;
    EXPECT_NEAR(row["measured_ms"].get<double>(), mean, 1e-9 * mean) << plan;
    EXPECT_NEAR(row["measured_median_ms"].get<double>(), mean, 1e-9 * mean) << plan;
    EXPECT_TRUE(std::isfinite(row["error_pct"].get<double>())) << plan;
    EXPECT_NE(md.find("| " + plan + " |"), std::string::npos) << plan;
    EXPECT_TRUE(fs::exists(out / "cpu-gpt-loopback" / "compare" / ((plan == "slices:2x2:sequence" ? "slices-2x2-sequence"
                                                                                                : plan) + ".json")))
        << plan;
  }
  const auto& fig = config["figures"];
  EXPECT_EQ(fig["plans_measured"], 4);
  EXPECT_TRUE(std::isfinite(fig["mape_pct"].get<double>()));
  EXPECT_GE(fig["kendall_tau"].get<double>(), -1.0);
  EXPECT_LE(fig["kendall_tau"].get<double>(), 1.0);
  EXPECT_GE(fig["regret_pct"].get<double>(), 0.0);  // the tuned plan is one of the candidates
  EXPECT_TRUE(fs::exists(out / "cpu-gpt-loopback" / "compare" / "tuned.html"));
  // Two ranks on one clock: every plan's collectives split into transfer and wait, both passes.
  const auto waits = fig["arrival_wait_by_phase"];
  ASSERT_TRUE(waits.contains("fwd") && waits.contains("bwd")) << fig.dump();
  EXPECT_GT(waits["bwd"]["collectives"].get<int>(), 0);
  EXPECT_GE(waits["bwd"]["measured_mean_us"].get<double>(), 0);
  EXPECT_TRUE(fs::exists(out / "cpu-gpt-loopback" / "plans" / "tuned.yaml"));
}

// --calibrate: a no-comm run first, the profile's compute and its stall fitted to it, every plan predicted
// with that.
TEST_F(FidelitySweep, CalibrateFitsComputeOnANoCommRunFirst) {
  if (const std::string tool = missing_tool(); !tool.empty()) GTEST_SKIP() << tool << " not built";
  const fs::path out = dir / "out";
  ASSERT_EQ(run(short_sweep("--calibrate --out " + out.string()), dir / "log"), 0) << slurp(dir / "log");
  const fs::path cfg = out / "cpu-gpt-loopback";
  EXPECT_TRUE(fs::exists(cfg / "calib" / "no-comm.trace.json"));
  const std::string profile = slurp(cfg / "calib" / "profile.yaml");
  EXPECT_NE(profile.find("calibrat"), std::string::npos) << profile.substr(0, 400);
  EXPECT_NE(profile.find("compute stall from the iteration time"), std::string::npos)
      << profile.substr(0, 400);
  const auto doc = nlohmann::json::parse(slurp(out / "fidelity.json"))["configurations"]["cpu-gpt-loopback"];
  EXPECT_EQ(doc["meta"]["calibrated_on"], "no-comm");
  EXPECT_EQ(doc["figures"]["plans_measured"], 4);  // --short has no no-comm row: every plan is scored
  // The predictions come from the calibrated profile, which the sim logs name.
  EXPECT_NE(slurp(cfg / "logs" / "megatron-sync.sim.log").find("profile.yaml"), std::string::npos);
}

// --refit-in-launch: no-comm joins the scored launch (unscored), the profile is fitted again on that run and
// every plan predicted with the refitted profile.
TEST_F(FidelitySweep, RefitInLaunchPredictsWithTheProfileFittedOnTheScoredLaunch) {
  if (const std::string tool = missing_tool(); !tool.empty()) GTEST_SKIP() << tool << " not built";
  const fs::path out = dir / "out";
  ASSERT_EQ(run(short_sweep("--calibrate --refit-in-launch --out " + out.string()), dir / "log"), 0)
      << slurp(dir / "log");
  const fs::path cfg = out / "cpu-gpt-loopback";
  const auto launch = nlohmann::json::parse(slurp(cfg / "meas" / "interleave.json"));
  std::vector<std::string> labels;
  for (const auto& p : launch["plans"]) labels.push_back(p["label"]);
  EXPECT_NE(std::find(labels.begin(), labels.end(), "no-comm"), labels.end()) << launch["plans"].dump();
  const std::string refitted = slurp(cfg / "calib" / "in-launch" / "profile.yaml");
  ASSERT_FALSE(refitted.empty());
  EXPECT_NE(refitted, slurp(cfg / "calib" / "profile.yaml"))
      << "fitted on other traces, yet the same figures";
  EXPECT_NE(slurp(cfg / "logs" / "domino-ds.sim.log").find("in-launch/profile.yaml"), std::string::npos)
      << slurp(cfg / "logs" / "domino-ds.sim.log");
  const auto doc = nlohmann::json::parse(slurp(out / "fidelity.json"))["configurations"]["cpu-gpt-loopback"];
  EXPECT_NE(doc["meta"]["profile"].get<std::string>().find("refitted on the scored launch"),
            std::string::npos);
  EXPECT_EQ(doc["figures"]["plans_measured"], 4);  // the four --short plans; no-comm is not scored
  EXPECT_NE(slurp(out / "fidelity.md").find("no-comm (calibration plan, not scored)"), std::string::npos);
}

// --overlap-plan names the overlapped calibration plan: it runs in the calibration launch, the collectives'
// delay is fitted on it, and a scored plan named so leaves the scored plans. megatron-sp-sync runs beside
// megatron-sync, its AllGathers and ReduceScatters fitted after the skew and before the overlapped plan.
TEST_F(FidelitySweep, OverlapPlanIsTheOverlappedCalibrationRunAndIsNotScored) {
  if (const std::string tool = missing_tool(); !tool.empty()) GTEST_SKIP() << tool << " not built";
  const fs::path out = dir / "out";
  ASSERT_EQ(run(short_sweep("--calibrate-sync --calibrate-overlap --overlap-plan slices:2x2:sequence --out " +
                            out.string()),
                dir / "log"),
            0)
      << slurp(dir / "log");
  const fs::path cfg = out / "cpu-gpt-loopback";
  EXPECT_TRUE(fs::exists(cfg / "calib" / "slices-2x2-sequence.trace.json"));
  EXPECT_NE(slurp(cfg / "logs" / "calib.overlap.log").find("comm delay"), std::string::npos)
      << slurp(cfg / "logs" / "calib.overlap.log");
  EXPECT_TRUE(fs::exists(cfg / "calib" / "megatron-sp-sync.trace.json"));
  EXPECT_NE(slurp(cfg / "logs" / "calib.sp.log").find("sp_transfer"), std::string::npos)
      << slurp(cfg / "logs" / "calib.sp.log");
  EXPECT_NE(slurp(cfg / "calib" / "profile.yaml").find("from " + (cfg / "calib" / "sp.yaml").string()),
            std::string::npos)
      << "the overlapped plan's fit starts from the sequence-parallel one";
  const auto doc = nlohmann::json::parse(slurp(out / "fidelity.json"))["configurations"]["cpu-gpt-loopback"];
  EXPECT_EQ(doc["meta"]["calibrated_on"],
            nlohmann::json({"no-comm", "megatron-sync", "megatron-sp-sync", "slices:2x2:sequence"}));
  EXPECT_EQ(doc["figures"]["plans_measured"], 2);  // domino-ds and tuned; the other two fitted the profile
  const std::string md = slurp(out / "fidelity.md");
  EXPECT_NE(md.find("slices:2x2:sequence (calibration plan, not scored)"), std::string::npos) << md;
  EXPECT_NE(md.find("on a slices:2x2:sequence run"), std::string::npos) << md;
  EXPECT_NE(md.find("on a megatron-sp-sync run"), std::string::npos) << md;
}

// --comm-cost: every plan runs beside its comm-off run (no-comm for megatron-sync), which is not scored, and
// the table splits each plan's time into its slicing's and its communication's cost.
TEST_F(FidelitySweep, CommCostRunsEveryPlanBesideItsCommOffRun) {
  if (const std::string tool = missing_tool(); !tool.empty()) GTEST_SKIP() << tool << " not built";
  const fs::path out = dir / "out";
  ASSERT_EQ(run(short_sweep("--comm-cost --out " + out.string()), dir / "log"), 0) << slurp(dir / "log");
  const fs::path cfg = out / "cpu-gpt-loopback";
  const auto launch = nlohmann::json::parse(slurp(cfg / "meas" / "interleave.json"));
  std::vector<std::string> labels;
  for (const auto& p : launch["plans"]) labels.push_back(p["label"]);
  for (const char* want : {"no-comm", "domino-ds+no-comm", "slices-2x2-sequence+no-comm", "tuned+no-comm"})
    EXPECT_NE(std::find(labels.begin(), labels.end(), want), labels.end())
        << want << " " << launch["plans"].dump();
  EXPECT_EQ(std::find(labels.begin(), labels.end(), "megatron-sync+no-comm"), labels.end());
  EXPECT_NE(slurp(cfg / "plans" / "tuned+no-comm.yaml").find("\ncomm: false\n"), std::string::npos);
  const auto fig =
      nlohmann::json::parse(slurp(out / "fidelity.json"))["configurations"]["cpu-gpt-loopback"]["figures"];
  EXPECT_EQ(fig["plans_measured"], 5);  // the four --short plans and no-comm
  ASSERT_TRUE(fig.contains("comm_cost")) << fig.dump(1);
  ASSERT_EQ(fig["comm_cost"]["plans"].size(), 4u) << fig["comm_cost"].dump(1);
  for (const auto& p : fig["comm_cost"]["plans"]) {
    EXPECT_EQ(p["comm_off_run"], p["plan"] == "megatron-sync" ? std::string("no-comm")
                                                              : p["plan"].get<std::string>() + "+no-comm");
    EXPECT_TRUE(std::isfinite(p["communication"]["measured_pct"].get<double>())) << p.dump();
  }
  EXPECT_NE(slurp(out / "fidelity.md").find("tuned+no-comm (comm-off run, not scored)"), std::string::npos);
  // The breakdown of each plan's communication cost: a row per plan, the predicted total that of
  // fidelity.json (read from the traces, not the table), no predicted compute slowdown (a predicted span
  // is an op's own time), and the collectives' measured mean over the iterations beside their median.
  ASSERT_EQ(run("python3 " + (kScripts / "comm-cost-breakdown.py").string() + " " + cfg.string(), dir / "bd"),
            0)
      << slurp(dir / "bd");
  const std::string breakdown = slurp(dir / "bd");
  for (const auto& p : fig["comm_cost"]["plans"]) {
    const std::string plan = p["plan"], head = "| " + plan + " | ";
    const size_t at = breakdown.find(head);
    ASSERT_NE(at, std::string::npos) << plan << "\n" << breakdown;
    std::vector<std::string> cells;  // compute slower, waits, other gaps, total, collectives
    std::istringstream row(breakdown.substr(at + head.size(), breakdown.find('\n', at) - at - head.size()));
    for (std::string cell; std::getline(row, cell, '|');) cells.push_back(cell);
    ASSERT_EQ(cells.size(), 5u) << row.str();
    EXPECT_NEAR(std::stod(cells[0]), 0.0, 0.051) << row.str();
    EXPECT_NEAR(std::stod(cells[3]), p["communication"]["predicted_pct"].get<double>(), 0.06) << row.str();
    std::vector<std::string> collectives;  // predicted / measured median / measured mean / this iteration
    std::istringstream own(cells[4]);
    for (std::string part; std::getline(own, part, '/');) collectives.push_back(part);
    ASSERT_EQ(collectives.size(), 4u) << row.str();
    EXPECT_GT(std::stod(collectives[2]), 0.0) << row.str();  // "-" (no mean recorded) would not parse
  }
  // The second table: a row per plan, starting with the collectives' MB beside compute (a number, >= 0).
  const size_t losses = breakdown.find("| plan | collectives beside compute, MB | compute slower, ms |");
  ASSERT_NE(losses, std::string::npos) << breakdown;
  for (const auto& p : fig["comm_cost"]["plans"]) {
    const std::string head = "| " + p["plan"].get<std::string>() + " | ";
    const size_t at = breakdown.find(head, losses);
    ASSERT_NE(at, std::string::npos) << head << "\n" << breakdown;
    std::istringstream row(breakdown.substr(at + head.size(), breakdown.find('\n', at) - at - head.size()));
    double mb = -1;
    row >> mb;
    EXPECT_GE(mb, 0.0) << row.str();
  }
  // The third table: per plan at most four wait sites, layers folded (no "L0." left), the predicted and the
  // measured waits non-negative; megatron-sync waits on its every collective, so it has sites.
  const size_t sites = breakdown.find("| plan | waiting op (layers folded) |");
  ASSERT_NE(sites, std::string::npos) << breakdown;
  std::map<std::string, int> per_plan;
  std::istringstream lines(breakdown.substr(sites));
  std::string line;
  std::getline(lines, line), std::getline(lines, line);  // header and rule
  while (std::getline(lines, line) && line.rfind("| ", 0) == 0) {
    std::vector<std::string> cells;
    std::istringstream row(line.substr(2));
    for (std::string cell; std::getline(row, cell, '|');) cells.push_back(cell);
    ASSERT_EQ(cells.size(), 3u) << line;
    ++per_plan[cells[0].substr(0, cells[0].find_last_not_of(' ') + 1)];
    EXPECT_EQ(cells[1].find(" L0."), std::string::npos) << line;
    std::istringstream waits(cells[2]);
    double pred = -1, meas = -1;
    char slash = 0;
    waits >> pred >> slash >> meas;
    EXPECT_EQ(slash, '/') << line;
    EXPECT_GE(pred, 0.0) << line;
    EXPECT_GE(meas, 0.0) << line;
  }
  for (const auto& [plan, count] : per_plan) EXPECT_LE(count, 4) << plan;
  EXPECT_GT(per_plan["megatron-sync"], 0) << breakdown.substr(sites);
}

// --reuse with --reuse-tuned: another profile scored on the first sweep's very measurements, its tuned plan
// included, with no execution and no tuning in between; and a subset of its plans scored on them alike.
TEST_F(FidelitySweep, ReuseTunedScoresAnotherProfileOnTheSameMeasurements) {
  if (const std::string tool = missing_tool(); !tool.empty()) GTEST_SKIP() << tool << " not built";
  const std::string sweep = short_sweep("--calibrate");
  const fs::path first = dir / "first", second = dir / "second";
  ASSERT_EQ(run(sweep + " --out " + first.string(), dir / "log1"), 0) << slurp(dir / "log1");
  const fs::path other_profile = fs::path(DOMINO_TEST_DATA) / ".." / "profiles" / "cpu-dev-2gbps.yaml";
  ASSERT_EQ(run(sweep + " --reuse " + first.string() + " --reuse-tuned --profile-loopback " +
                    other_profile.string() + " --out " + second.string(),
                dir / "log2"),
            0)
      << slurp(dir / "log2");
  const std::string log = slurp(dir / "log2");
  EXPECT_NE(log.find("measurements reused"), std::string::npos) << log;
  EXPECT_EQ(log.find("executing"), std::string::npos) << log;
  const fs::path a = first / "cpu-gpt-loopback", b = second / "cpu-gpt-loopback";
  EXPECT_EQ(slurp(b / "plans" / "tuned.yaml"), slurp(a / "plans" / "tuned.yaml"));
  EXPECT_FALSE(fs::exists(b / "logs" / "tune.log")) << "the second sweep tuned again";
  const auto row_of = [](const fs::path& out, const std::string& plan) {
    const nlohmann::json doc = nlohmann::json::parse(slurp(out / "fidelity.json"));
    for (const auto& row : doc["configurations"]["cpu-gpt-loopback"]["rows"])
      if (row["plan"] == plan) return row;
    return nlohmann::json();
  };
  const nlohmann::json tuned_a = row_of(first, "tuned"), tuned_b = row_of(second, "tuned");
  ASSERT_FALSE(tuned_b.is_null());
  EXPECT_EQ(tuned_b["measured_samples_ms"], tuned_a["measured_samples_ms"]);
  EXPECT_NE(tuned_b["predicted_ms"], tuned_a["predicted_ms"]) << "the other profile predicted the same time";
  // The configuration records the launch it scores: the settings that took effect there (not "default"), and
  // the load average it ran under, not the re-score's.
  const auto config_a = nlohmann::json::parse(slurp(a / "config.json"));
  const auto config_b = nlohmann::json::parse(slurp(b / "config.json"));
  const auto launch = nlohmann::json::parse(slurp(a / "meas" / "interleave.json"));
  EXPECT_EQ(config_a["cpu_placement"], launch["cpu_placement"]);
  EXPECT_EQ(config_b["cpu_placement"], launch["cpu_placement"]);
  EXPECT_EQ(config_b["worker_wait"], launch["worker_wait"]);
  EXPECT_EQ(config_b["load_average"], config_a["load_average"]);
  // A launch that ran more plans than asked for is reused too; only the plans asked for are scored.
  const fs::path third = dir / "third";
  ASSERT_EQ(
      run(sweep_with("--plans 'domino-ds tuned' --models cpu-gpt --links 0 --seq-len 32 --micro-batch 4 "
                     "--iters 2 --warmup 1 --calibrate --build " +
                     fs::path(DOMINO_BIN_DIR).parent_path().string() + " --reuse " + first.string() +
                     " --reuse-tuned --out " + third.string()),
          dir / "log3"),
      0)
      << slurp(dir / "log3");
  EXPECT_NE(slurp(dir / "log3").find("measurements reused"), std::string::npos) << slurp(dir / "log3");
  const auto third_doc =
      nlohmann::json::parse(slurp(third / "fidelity.json"))["configurations"]["cpu-gpt-loopback"];
  EXPECT_EQ(third_doc["figures"]["plans_measured"], 2);
  EXPECT_EQ(row_of(third, "tuned")["measured_samples_ms"], tuned_a["measured_samples_ms"]);
}

TEST_F(FidelitySweep, BadUsageExitsTwo) {
  EXPECT_EQ(run(sweep_with("--bogus"), dir / "log"), 2);
  EXPECT_NE(slurp(dir / "log").find("unknown argument '--bogus'"), std::string::npos);
  EXPECT_EQ(run(sweep_with("--iters 0"), dir / "log"), 2);
  EXPECT_EQ(run(sweep_with("--plans 'no-comm tuned no-comm'"), dir / "log"), 2);
  EXPECT_NE(slurp(dir / "log").find("--plans names no-comm twice"), std::string::npos) << slurp(dir / "log");
  EXPECT_EQ(run(sweep_with("--plans ''"), dir / "log"), 2);
  EXPECT_EQ(run(sweep_with("--plans tuned --short"), dir / "log"), 2);
  EXPECT_EQ(run(sweep_with("--refit-in-launch"), dir / "log"), 2);
  EXPECT_NE(slurp(dir / "log").find("--refit-in-launch needs --calibrate"), std::string::npos)
      << slurp(dir / "log");
  EXPECT_EQ(run(sweep_with("--reuse-tuned"), dir / "log"), 2);
  EXPECT_NE(slurp(dir / "log").find("--reuse-tuned needs --reuse"), std::string::npos) << slurp(dir / "log");
  EXPECT_EQ(run(sweep_with("--sync-fit sync_iteration"), dir / "log"), 2);
  EXPECT_NE(slurp(dir / "log").find("--sync-fit needs --calibrate-sync"), std::string::npos)
      << slurp(dir / "log");
  EXPECT_EQ(run(sweep_with("--sp-fit none"), dir / "log"), 2);
  EXPECT_NE(slurp(dir / "log").find("--sp-fit needs --calibrate-sync"), std::string::npos)
      << slurp(dir / "log");
  EXPECT_EQ(run(sweep_with("--compute-fit gemm"), dir / "log"), 2);
  EXPECT_NE(slurp(dir / "log").find("--compute-fit needs --calibrate"), std::string::npos)
      << slurp(dir / "log");
  EXPECT_EQ(run(sweep_with("--calibrate-sync --overlap-fit interference"), dir / "log"), 2);
  EXPECT_NE(slurp(dir / "log").find("--overlap-fit needs --calibrate-overlap"), std::string::npos)
      << slurp(dir / "log");
  EXPECT_EQ(run(sweep_with("--overlap-plan slices:2x2:batch"), dir / "log"), 2);
  EXPECT_NE(slurp(dir / "log").find("--overlap-plan needs --calibrate-overlap"), std::string::npos)
      << slurp(dir / "log");
  EXPECT_EQ(run(sweep_with("--calibrate-sync --calibrate-overlap --overlap-plan tuned"), dir / "log"), 2);
  EXPECT_NE(slurp(dir / "log").find("--overlap-plan cannot be tuned"), std::string::npos)
      << slurp(dir / "log");
  // The table reads a plan's measurement files as a comma-separated list: a comma in the folder would split
  // it.
  EXPECT_EQ(run(sweep_with("--out " + (dir / "a,b").string()), dir / "log"), 2);
  EXPECT_FALSE(fs::exists(dir / "a,b"));
}

// Hand-made predictions and measurements: the figures are known exactly.
TEST_F(FidelitySweep, TableFiguresFromKnownRows) {
  const fs::path cfg = dir / "cfg";
  write_rows(cfg, {{"megatron-sync", 100000, {{90000, 80000, 70000}}},  // +25 % (median: the middle one)
                   {"domino-ds", 50000, {{50000, 40000, 60000}}},       // 0 %
                   {"no-comm", 40000, {{30000, 20000, 25000}}},         // +60 %
                   {"tuned", 45000, {{55000, 50000, 60000}}}});         // -18.18 %
  const auto fig = table()["figures"];
  EXPECT_NEAR(fig["mape_pct"].get<double>(), (25.0 + 0 + 60 + 100.0 * 10 / 55) / 4, 1e-9);
  // Predicted order sync > ds > tuned > no-comm, measured sync > tuned > ds > no-comm: of the 6 pairs only
  // (ds, tuned) is discordant -> tau = (5 - 1) / 6.
  EXPECT_NEAR(fig["kendall_tau"].get<double>(), 4.0 / 6, 1e-9);
  // Best measured plan that trains is domino-ds (no-comm is only a bound): 55 / 50 - 1.
  EXPECT_NEAR(fig["regret_pct"].get<double>(), 10.0, 1e-9);
  EXPECT_EQ(fig["best_measured_plan"], "domino-ds");
  EXPECT_EQ(fig["best_predicted_plan"], "tuned");
  // The profile's own pick among the measured plans (tuned, predicted fastest) against the best measured.
  EXPECT_NEAR(fig["pick_regret_pct"].get<double>(), 10.0, 1e-9);
  // A tie in one ranking only: tau-b's denominator shrinks (same predictions, ds measured like tuned).
  std::ofstream(cfg / "domino-ds.json") << nlohmann::json{{"iteration_time_us", {{"samples", {55000.0}}}}}.dump();
  const auto tied = table()["figures"];
  EXPECT_NEAR(tied["kendall_tau"].get<double>(), 5 / std::sqrt(6.0 * 5), 1e-9);
  EXPECT_FALSE(tied.contains("repeatability"));  // one round: nothing to compare the measurement with
}

// A configuration calibrated on a plan's run: that plan is listed but left out of every figure.
TEST_F(FidelitySweep, TableLeavesTheCalibrationPlanUnscored) {
  const fs::path cfg = dir / "cfg";
  write_rows(cfg, {{"megatron-sync", 110000, {{100000}}}, {"no-comm", 10000, {{50000}}}, {"tuned", 90000, {{100000}}}});
  std::ofstream(cfg / "config.json") << nlohmann::json{{"model", "m"}, {"calibrated_on", "no-comm"}}.dump();
  const auto fig = table()["figures"];
  EXPECT_EQ(fig["plans_measured"], 2);
  EXPECT_NEAR(fig["mape_pct"].get<double>(), 10.0, 1e-9);  // +10 % and -10 %; no-comm's -80 % left out
  EXPECT_EQ(fig["not_scored"], "no-comm");
  EXPECT_NE(slurp(dir / "fidelity.md").find("no-comm (calibration plan, not scored)"), std::string::npos);
}

// Per op kind, the median over the scored plans of each plan's median per-op error (domino-compare's
// by_kind), its bootstrap interval over the plans, and the median of the kind's measured spread where the
// compare figures have one.
TEST_F(FidelitySweep, OpErrorByKindAndWaitsByPhaseOverTheScoredPlans) {
  const fs::path cfg = dir / "cfg";
  write_rows(cfg, {{"megatron-sync", 100000, {{100000}}}, {"domino-ds", 100000, {{100000}}}, {"tuned", 100000, {{100000}}}});
  const std::vector<std::pair<double, double>> gemm = {{5, 20}, {9, 30}, {20, 40}};  // (error, spread) per plan
  std::ofstream tsv(cfg / "rows.tsv");
  int k = 0;
  for (const char* plan : {"megatron-sync", "domino-ds", "tuned"}) {
    const fs::path cmp = cfg / (std::string(plan) + ".compare.json");
    nlohmann::json kinds = {{"gemm", {{"median_pct", gemm[k].first}, {"spread_pct", gemm[k].second}}}};
    if (k > 0) kinds["norm"] = {{"median_pct", 10.0 * k}, {"spread_pct", nullptr}};  // no spread recorded
    // Plan k: k + 1 backward collectives waiting 100 us predicted, 100 (k + 1) measured; plan 0 also two
    // forward.
    nlohmann::json waits = {
        {"bwd", {{"count", k + 1}, {"predicted_mean_us", 100}, {"measured_mean_us", 100 * (k + 1)}}}};
    if (k == 0) waits["fwd"] = {{"count", 2}, {"predicted_mean_us", 50}, {"measured_mean_us", 80}};
    std::ofstream(cmp) << nlohmann::json{
        {"op_error_median_pct", 1},
        {"exposed_comm_us", {{"measured", 0}}},
        {"by_kind", kinds},
        {"arrival_wait_by_phase",
         waits}}.dump();
    tsv << plan << '\t' << (cfg / (std::string(plan) + ".pred.json")).string() << '\t'
        << (cfg / (std::string(plan) + ".json")).string() << '\t' << cmp.string() << "\tok\n";
    ++k;
  }
  tsv.close();
  const auto figures = table()["figures"];
  const auto kinds = figures["op_error_by_kind"];
  EXPECT_DOUBLE_EQ(kinds["gemm"]["median_pct"].get<double>(), 9);
  EXPECT_DOUBLE_EQ(kinds["gemm"]["spread_pct"].get<double>(), 30);
  EXPECT_EQ(kinds["gemm"]["plans"], 3);
  EXPECT_DOUBLE_EQ(kinds["norm"]["median_pct"].get<double>(), 15);  // 10 and 20
  EXPECT_TRUE(kinds["norm"]["spread_pct"].is_null());
  // Three plans' errors 5, 9, 20: a resample's median is one of them, each about a quarter of the time at the
  // ends, so the interval spans the plans.
  EXPECT_DOUBLE_EQ(kinds["gemm"]["interval_95"][0].get<double>(), 5);
  EXPECT_DOUBLE_EQ(kinds["gemm"]["interval_95"][1].get<double>(), 20);
  EXPECT_NE(slurp(dir / "fidelity.md").find("gemm 9.0 % [5.0, 20.0] (30 %)"), std::string::npos)
      << slurp(dir / "fidelity.md");
  // Weighted by each plan's collectives: (1 x 100 + 2 x 200 + 3 x 300) / 6.
  const auto waits = figures["arrival_wait_by_phase"];
  EXPECT_EQ(waits["bwd"]["collectives"], 6);
  EXPECT_DOUBLE_EQ(waits["bwd"]["predicted_mean_us"].get<double>(), 100);
  EXPECT_NEAR(waits["bwd"]["measured_mean_us"].get<double>(), 1400.0 / 6, 1e-9);
  EXPECT_DOUBLE_EQ(waits["fwd"]["measured_mean_us"].get<double>(), 80);
  EXPECT_NE(slurp(dir / "fidelity.md").find("bwd 100 against 233 us (6 collectives), fwd 50 against 80 us"),
            std::string::npos)
      << slurp(dir / "fidelity.md");
}

// The exposed communication of both sides comes from domino-compare (one accounting over the two traces),
// not from the simulator's summary, which write_rows sets to 0 for every plan.
TEST_F(FidelitySweep, TableTakesBothSidesOfTheExposedCommunicationFromTheCompare) {
  const fs::path cfg = dir / "cfg";
  write_rows(cfg, {{"megatron-sync", 100000, {{100000}}},
                   {"domino-ds", 100000, {{100000}}},
                   {"tuned", 100000, {{100000}}}});
  // (predicted, measured) exposed communication per plan, us; the tuned plan's compare has no predicted side.
  const std::vector<std::pair<double, double>> exposed = {{30000, 40000}, {10000, 4000}, {-1, 7000}};
  std::ofstream tsv(cfg / "rows.tsv");
  int k = 0;
  for (const char* plan : {"megatron-sync", "domino-ds", "tuned"}) {
    const fs::path cmp = cfg / (std::string(plan) + ".compare.json");
    nlohmann::json sides = {{"measured", exposed[size_t(k)].second}};
    if (exposed[size_t(k)].first >= 0) sides["predicted"] = exposed[size_t(k)].first;
    std::ofstream(cmp) << nlohmann::json{{"op_error_median_pct", 1}, {"exposed_comm_us", sides}}.dump();
    tsv << plan << '\t' << (cfg / (std::string(plan) + ".pred.json")).string() << '\t'
        << (cfg / (std::string(plan) + ".json")).string() << '\t' << cmp.string() << "\tok\n";
    ++k;
  }
  tsv.close();
  const auto config = table();
  EXPECT_DOUBLE_EQ(config["rows"][0]["predicted_exposed_comm_ms"].get<double>(), 30);
  EXPECT_DOUBLE_EQ(config["rows"][1]["predicted_exposed_comm_ms"].get<double>(), 10);
  EXPECT_FALSE(config["rows"][2].contains("predicted_exposed_comm_ms")) << config["rows"][2].dump();
  // The two plans with both sides: means (30 + 10) / 2 and (40 + 4) / 2, |30 - 40| and |10 - 4| apart.
  const auto fig = config["figures"]["exposed_comm"];
  EXPECT_EQ(fig["plans"], 2);
  EXPECT_DOUBLE_EQ(fig["predicted_mean_ms"].get<double>(), 20);
  EXPECT_DOUBLE_EQ(fig["measured_mean_ms"].get<double>(), 22);
  EXPECT_DOUBLE_EQ(fig["mean_abs_error_ms"].get<double>(), 8);
  const std::string md = slurp(dir / "fidelity.md");
  EXPECT_NE(md.find("| n/a / 7.0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("20.0 ms predicted against 22.0 measured, 8.0 ms apart per plan"), std::string::npos)
      << md;
}

// Several calibration plans (compute on no-comm, the arrival skew on megatron-sync): none of them scored.
TEST_F(FidelitySweep, TableLeavesEveryListedCalibrationPlanUnscored) {
  const fs::path cfg = dir / "cfg";
  write_rows(cfg, {{"megatron-sync", 150000, {{100000}}}, {"no-comm", 10000, {{50000}}}, {"tuned", 90000, {{100000}}}});
  std::ofstream(cfg / "config.json")
      << nlohmann::json{{"model", "m"}, {"calibrated_on", {"no-comm", "megatron-sync"}}}.dump();
  const auto fig = table()["figures"];
  EXPECT_EQ(fig["plans_measured"], 1);
  EXPECT_NEAR(fig["mape_pct"].get<double>(), 10.0, 1e-9);  // tuned alone
  const std::string md = slurp(dir / "fidelity.md");
  EXPECT_NE(md.find("megatron-sync (calibration plan, not scored)"), std::string::npos) << md;
  EXPECT_NE(md.find("no-comm (calibration plan, not scored)"), std::string::npos) << md;
}

// Two rounds per plan: each round's medians are scored against the other round like a prediction.
TEST_F(FidelitySweep, TableRepeatabilityFromTwoRounds) {
  // Round medians (one sample each): a = {100, 50, 40} ms, b = {110, 30, 35} ms.
  write_rows(dir / "cfg", {{"megatron-sync", 1000, {{100000}, {110000}}},
                           {"domino-ds", 1000, {{50000}, {30000}}},
                           {"tuned", 1000, {{40000}, {35000}}}});
  const auto rep = table()["figures"]["repeatability"];
  ASSERT_EQ(rep["rounds"], 2) << rep.dump();
  EXPECT_NEAR(rep["mape_pct"][0].get<double>(), 100.0 * (10.0 / 110 + 20.0 / 30 + 5.0 / 35) / 3, 1e-9);
  EXPECT_NEAR(rep["mape_pct"][1].get<double>(), 100.0 * (10.0 / 100 + 20.0 / 50 + 5.0 / 40) / 3, 1e-9);
  // Of the 3 pairs only (domino-ds, tuned) is ordered differently in the two rounds.
  EXPECT_NEAR(rep["kendall_tau"][0].get<double>(), 1.0 / 3, 1e-9);
  EXPECT_NEAR(rep["kendall_tau"][1].get<double>(), 1.0 / 3, 1e-9);
  EXPECT_NE(slurp(dir / "fidelity.md").find("Repeatability of the measurement"), std::string::npos);
}

// An interleaved launch (sample k of every plan from round k): bootstrap intervals, the split-half floor and
// the speedups over megatron-async, on rounds whose every resample is known. Only domino-ds varies (80 and
// 99 ms in alternate rounds): a resample's median of its 4 iterations is 80, 89.5 or 99 ms, the first and
// the last each with probability 5/16, so the 2.5th and 97.5th percentiles of 1000 resamples are exactly
// the figures with 80 and with 99 ms.
TEST_F(FidelitySweep, TableIntervalsSplitHalfAndSpeedupsOfAnInterleavedLaunch) {
  const fs::path cfg = dir / "cfg";
  write_interleaved_launch(cfg, {{"megatron-async", 100000, {{100000, 100000, 100000, 100000}}},
                                 {"domino-ds", 80000, {{80000, 99000, 80000, 99000}}},
                                 {"tuned", 70000, {{90000, 90000, 90000, 90000}}}});
  const auto fig = table()["figures"];
  EXPECT_NEAR(fig["mape_pct"].get<double>(), 100.0 * (0 + 9.5 / 89.5 + 20.0 / 90) / 3, 1e-9);
  const auto& ci = fig["interval_95"];
  EXPECT_NEAR(ci["mape_pct"][0].get<double>(), 100.0 * (0 + 0 + 20.0 / 90) / 3, 1e-9) << ci.dump();
  EXPECT_NEAR(ci["mape_pct"][1].get<double>(), 100.0 * (0 + 19.0 / 99 + 20.0 / 90) / 3, 1e-9) << ci.dump();
  // domino-ds below tuned (80, 89.5 ms): one discordant pair of 3; above (99 ms): the predicted order.
  EXPECT_NEAR(ci["kendall_tau"][0].get<double>(), 1.0 / 3, 1e-9);
  EXPECT_NEAR(ci["kendall_tau"][1].get<double>(), 1.0, 1e-9);
  // The tuned plan (90 ms) against the best that trains: domino-ds at 80 ms (12.5 %) or itself (0 %).
  EXPECT_NEAR(ci["regret_pct"][0].get<double>(), 0.0, 1e-9);
  EXPECT_NEAR(ci["regret_pct"][1].get<double>(), 12.5, 1e-9);

  // Odd rounds (100, 80, 90 ms) against even rounds (100, 99, 90 ms).
  const auto& half = fig["split_half"];
  EXPECT_EQ(half["rounds"], 4);
  EXPECT_NEAR(half["mape_pct"].get<double>(), 100.0 * (19.0 / 99) / 3, 1e-9);
  EXPECT_NEAR(half["kendall_tau"].get<double>(), 1.0 / 3, 1e-9);

  // Speedups over megatron-async, per round: domino-ds 1.25 and 100/99 (median: their mean), tuned 100/90.
  const auto& sp = fig["speedup"];
  EXPECT_EQ(sp["baseline"], "megatron-async");
  ASSERT_EQ(sp["plans"].size(), 2u);
  const double ds_measured = (1.25 + 100.0 / 99) / 2;
  EXPECT_NEAR(sp["plans"][0]["measured"].get<double>(), ds_measured, 1e-9);
  EXPECT_NEAR(sp["plans"][0]["predicted"].get<double>(), 1.25, 1e-9);
  EXPECT_NEAR(sp["plans"][0]["error_points"].get<double>(), 100 * (1.25 - ds_measured), 1e-9);
  EXPECT_NEAR(sp["plans"][1]["error_points"].get<double>(), 100 * (100.0 / 70 - 100.0 / 90), 1e-9);
  EXPECT_NEAR(sp["mean_abs_error_points"].get<double>(),
              50 * ((1.25 - ds_measured) + (100.0 / 70 - 100.0 / 90)), 1e-9);
  const std::string md = slurp(dir / "fidelity.md");
  EXPECT_NE(md.find("Noise floor, split-half"), std::string::npos) << md;
  EXPECT_NE(md.find("Speedup over megatron-async"), std::string::npos) << md;
  EXPECT_NE(md.find("95 % intervals"), std::string::npos) << md;
}

// A plan's time over no-comm's splits round by round: its comm-off run over no-comm (the slicing's cost) and
// the plan over its comm-off run (the communication's); megatron-sync's comm-off run is no-comm itself.
TEST_F(FidelitySweep, TableSplitsEachPlanIntoItsSlicingAndCommunicationCosts) {
  const fs::path cfg = dir / "cfg";
  write_interleaved_launch(cfg, {{"no-comm", 100000, {{100000, 110000, 100000, 110000}}},
                                 {"megatron-sync", 120000, {{120000, 132000, 120000, 132000}}},
                                 {"slices:2x1:batch", 110000, {{130000, 143000, 130000, 143000}}},
                                 {"slices:2x1:batch+no-comm", 105000, {{104000, 114400, 104000, 114400}}}});
  const auto fig = table()["figures"];
  EXPECT_EQ(fig["plans_measured"], 3);  // the comm-off run is not scored
  const auto& cost = fig["comm_cost"];
  ASSERT_EQ(cost["plans"].size(), 2u) << cost.dump(1);
  const auto& sync = cost["plans"][0];
  EXPECT_EQ(sync["comm_off_run"], "no-comm");
  EXPECT_NEAR(sync["slicing"]["measured_pct"].get<double>(), 0.0, 1e-9);
  EXPECT_NEAR(sync["communication"]["predicted_pct"].get<double>(), 20.0, 1e-9);
  EXPECT_NEAR(sync["communication"]["measured_pct"].get<double>(), 20.0, 1e-9);
  const auto& sliced = cost["plans"][1];
  EXPECT_NEAR(sliced["slicing"]["predicted_pct"].get<double>(), 5.0, 1e-9);
  EXPECT_NEAR(sliced["slicing"]["measured_pct"].get<double>(), 4.0, 1e-9);
  EXPECT_NEAR(sliced["slicing"]["error_points"].get<double>(), 1.0, 1e-9);
  const double comm_predicted = 100.0 * (110.0 / 105 - 1), comm_measured = 100.0 * (130.0 / 104 - 1);
  EXPECT_NEAR(sliced["communication"]["measured_pct"].get<double>(), comm_measured, 1e-9);
  EXPECT_NEAR(sliced["communication"]["error_points"].get<double>(), comm_predicted - comm_measured, 1e-9);
  EXPECT_NEAR(cost["communication"]["mean_abs_error_points"].get<double>(),
              (comm_measured - comm_predicted) / 2, 1e-9);
  EXPECT_NEAR(cost["slicing"]["mean_abs_error_points"].get<double>(), 0.5, 1e-9);
  const std::string md = slurp(dir / "fidelity.md");
  EXPECT_NE(md.find("slices:2x1:batch+no-comm (comm-off run, not scored)"), std::string::npos) << md;
  EXPECT_NE(md.find("communication cost"), std::string::npos) << md;
}

// Every plan 20 % slower in the even rounds: the raw split-half sees the drift, the drift-divided one does not;
// a plan that differs from the others inside a round still counts after the division.
TEST_F(FidelitySweep, TableSplitHalfDividesOutTheDriftCommonToARound) {
  const fs::path cfg = dir / "cfg";
  write_interleaved_launch(cfg, {{"megatron-async", 100000, {{100000, 120000, 100000, 120000}}},
                                 {"domino-ds", 50000, {{50000, 60000, 50000, 60000}}},
                                 {"tuned", 80000, {{80000, 96000, 80000, 96000}}}});
  auto half = table()["figures"]["split_half"];
  EXPECT_NEAR(half["mape_pct"].get<double>(), 100.0 * 20 / 120, 1e-9);
  EXPECT_NEAR(half["drift_divided_out"]["mape_pct"].get<double>(), 0.0, 1e-9) << half.dump();
  EXPECT_NEAR(half["drift_divided_out"]["kendall_tau"].get<double>(), 1.0, 1e-9);
  EXPECT_NE(slurp(dir / "fidelity.md").find("drift common to each round divided out"), std::string::npos);

  // Now only domino-ds is slower in the even rounds (60 against 50 ms): the geometric mean of those rounds
  // rises by 1.2^(1/3), and every plan's odd median over its even median is what is left of the drift.
  write_rows(cfg, {{"megatron-async", 100000, {{100000, 100000, 100000, 100000}}},
                   {"domino-ds", 50000, {{50000, 60000, 50000, 60000}}},
                   {"tuned", 80000, {{80000, 80000, 80000, 80000}}}});
  half = table()["figures"]["split_half"];
  const double f = std::cbrt(1.2);  // even-round factor over odd-round factor
  const double expected = 100.0 * ((f - 1) + std::abs(f / 1.2 - 1) + (f - 1)) / 3;
  EXPECT_NEAR(half["drift_divided_out"]["mape_pct"].get<double>(), expected, 1e-9) << half.dump();
}

// A rank whose compute ran 20 ms slower in one iteration: that iteration counts as its plan's typical one
// once the compute speed is taken out (minus the slower rank's compute time above its median); the rest is
// kept.
TEST_F(FidelitySweep, TableSplitHalfTakesEachIterationsComputeSpeedOut) {
  const fs::path cfg = dir / "cfg";
  write_interleaved_launch(cfg, {{"megatron-async", 100000, {{100000, 120000, 100000, 100000}}},
                                 {"domino-ds", 50000, {{50000, 50000, 50000, 55000}}}});
  // megatron-async's rank 1 computed 20 ms longer in round 2; domino-ds's 5 ms in round 4 went elsewhere.
  write_compute_busy(cfg, "megatron-async", {100000, 120000, 100000, 100000},
                     {{80000, 80000, 80000, 80000}, {70000, 90000, 70000, 70000}});
  write_compute_busy(cfg, "domino-ds", {50000, 50000, 50000, 55000},
                     {{40000, 40000, 40000, 40000}, {40000, 40000, 40000, 40000}});
  const auto half = table()["figures"]["split_half"];
  // Raw: async's odd rounds 100, even 110 (median of 120 and 100); ds odd 50, even 52.5.
  EXPECT_NEAR(half["mape_pct"].get<double>(), 100.0 * (10.0 / 110 + 2.5 / 52.5) / 2, 1e-9) << half.dump();
  // Taken out: async's round 2 becomes 100; ds keeps its 55 (no compute time behind it).
  EXPECT_NEAR(half["compute_speed_taken_out"]["mape_pct"].get<double>(), 100.0 * (2.5 / 52.5) / 2, 1e-9);
  EXPECT_NE(slurp(dir / "fidelity.md").find("compute speed taken out"), std::string::npos);

  // A plan without the compute times (an older launch): the figure is left out, the rest stays.
  write_interleaved_launch(
      cfg, {{"megatron-async", 100000, {{100000, 120000}}}, {"domino-ds", 50000, {{50000, 50000}}}});
  const auto without = table()["figures"]["split_half"];
  EXPECT_FALSE(without.contains("compute_speed_taken_out")) << without.dump();
  EXPECT_TRUE(without.contains("drift_divided_out"));
}

// Each plan's ranks' compute per iteration, rank against rank: the slowest over the fastest, from each rank's
// median, and which rank was the slowest in most plans.
TEST_F(FidelitySweep, TableComparesTheRanksComputeSpeed) {
  const fs::path cfg = dir / "cfg";
  write_interleaved_launch(cfg, {{"no-comm", 90000, {{90000, 90000, 90000}}},
                                 {"megatron-async", 100000, {{100000, 100000, 100000}}},
                                 {"domino-ds", 95000, {{95000, 95000, 95000}}}});
  write_compute_busy(cfg, "no-comm", {90000, 90000, 90000},
                     {{80000, 80000, 99000}, {84000, 84000, 60000}});  // medians 80, 84
  write_compute_busy(cfg, "megatron-async", {100000, 100000, 100000},
                     {{70000, 70000, 70000}, {77000, 77000, 77000}});
  write_compute_busy(cfg, "domino-ds", {95000, 95000, 95000}, {{72000, 72000, 72000}, {70000, 70000, 70000}});
  const auto speed = table()["figures"]["rank_speed"];
  ASSERT_FALSE(speed.is_null());
  EXPECT_NEAR(speed["no_comm"].get<double>(), 84.0 / 80, 1e-12) << speed.dump();
  EXPECT_NEAR(speed["max"].get<double>(), 1.1, 1e-12);
  EXPECT_NEAR(speed["min"].get<double>(), 72.0 / 70, 1e-12);
  EXPECT_EQ(speed["slowest_rank_mostly"].get<int>(), 1);
  EXPECT_EQ(speed["plans"]["domino-ds"]["slowest_rank"].get<int>(), 0);
  EXPECT_NE(slurp(dir / "fidelity.md").find("the slowest rank computed 2.9-10.0 % longer"), std::string::npos)
      << slurp(dir / "fidelity.md");
}

// Without the interleaved flag the rounds of different plans are not aligned: no split-half, no speedups.
TEST_F(FidelitySweep, TableScoresNoRoundsOfSeparateLaunches) {
  write_rows(dir / "cfg", {{"megatron-async", 100000, {{100000, 100000}}}, {"domino-ds", 80000, {{80000, 99000}}}});
  const auto fig = table()["figures"];
  EXPECT_FALSE(fig.contains("split_half")) << fig.dump();
  EXPECT_FALSE(fig.contains("speedup")) << fig.dump();
  EXPECT_TRUE(fig.contains("interval_95")) << fig.dump();
}

// The tuner's pick with a named plan's very schedule: the two runs' gap is reported, and the iteration-time
// figures count the one schedule once, at the mean of its two runs; a pick whose predicted ops differ is
// scored on its own run.
TEST_F(FidelitySweep, TablePoolsTheTunedPickWithItsScheduleTwin) {
  const fs::path cfg = dir / "cfg";
  write_interleaved_launch(cfg, {{"megatron-async", 100000, {{100000, 100000, 100000, 100000}}},
                                 {"domino-ds", 120000, {{104000, 104000, 104000, 104000}}},
                                 {"tuned", 100000, {{110000, 110000, 110000, 110000}}}});
  write_predicted_trace(cfg, "megatron-async", {60000, 40000});
  write_predicted_trace(cfg, "domino-ds", {70000, 50000});
  write_predicted_trace(cfg, "tuned", {60000, 40000});
  const auto fig = table()["figures"];
  ASSERT_TRUE(fig.contains("tuned_twin")) << fig.dump();
  EXPECT_EQ(fig["tuned_twin"]["plan"], "megatron-async");
  EXPECT_NEAR(fig["tuned_twin"]["gap_pct"].get<double>(), 10.0, 1e-9);
  EXPECT_NEAR(fig["tuned_twin"]["round_ratio"]["median"].get<double>(), 1.1, 1e-12);
  // Both runs count 105 ms; domino-ds's 104 ms is the best measured.
  EXPECT_NEAR(fig["regret_pct"].get<double>(), 100.0 * (105.0 / 104 - 1), 1e-9);
  EXPECT_EQ(fig["best_measured_plan"], "domino-ds");
  // Two plans, not three: the schedule (100 ms predicted, 105 measured) against domino-ds (120 against 104).
  // Counted twice, MAPE would be (0 + 16/104 + 10/110) / 3 and tau 0 (one pair tied in the prediction).
  EXPECT_NEAR(fig["mape_pct"].get<double>(), 100.0 * (5.0 / 105 + 16.0 / 104) / 2, 1e-9) << fig.dump();
  EXPECT_NEAR(fig["kendall_tau"].get<double>(), -1.0, 1e-12);
  ASSERT_EQ(fig["speedup"]["plans"].size(), 1u) << fig["speedup"].dump();
  EXPECT_EQ(fig["speedup"]["plans"][0]["plan"], "domino-ds");
  EXPECT_NE(slurp(dir / "fidelity.md").find("schedule op for op"), std::string::npos);
  EXPECT_NE(slurp(dir / "fidelity.md").find("count the one schedule once"), std::string::npos);

  write_predicted_trace(cfg, "tuned", {60000, 40001});  // one op's predicted time differs: another schedule
  const auto apart = table()["figures"];
  EXPECT_FALSE(apart.contains("tuned_twin")) << apart.dump();
  EXPECT_NEAR(apart["regret_pct"].get<double>(), 10.0, 1e-9);
  EXPECT_EQ(apart["best_measured_plan"], "megatron-async");

  fs::remove(cfg / "tuned.pred.trace.json");  // equal predicted times alone do not make one schedule
  EXPECT_FALSE(table()["figures"].contains("tuned_twin"));
}

}  // namespace
