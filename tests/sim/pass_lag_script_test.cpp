// pass_lag_script_test.cpp: scripts/pass-lag.py on a hand-made configuration folder whose lags and start gaps
// are known: per block of the compute stream, the measured end (the mean over iterations) less the predicted,
// and the ranks' start gap at the block's collectives; with --phases each phase's time per rank and the
// compute's busy and idle time in it; an unreadable trace or a measured trace without per-iteration spans is
// exit code 2 with a message, no traceback.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/script_run.hpp"

namespace {

namespace fs = std::filesystem;

nlohmann::json predicted_span(int op, int stream, const std::string& phase, double ts, double dur) {
  nlohmann::json args{
      {"op", op}, {"phase", phase}, {"layer", 0}, {"code", stream == 1 ? "AllReduce" : "MatMul"}};
  if (stream == 1) args["arrival_wait_us"] = 300;
  return {{"name", "op" + std::to_string(op)},
          {"ph", "X"},
          {"pid", 0},
          {"tid", stream},
          {"ts", ts},
          {"dur", dur},
          {"args", args}};
}

void write_json(const fs::path& path, const nlohmann::json& j) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << j.dump();
}

fs::path make_config(const std::string& tag) {
  const fs::path config = fs::temp_directory_path() / ("domino_pass_lag_" + tag + std::to_string(getpid()));
  // Predicted: forward compute 0 (0-1000 us), its collective 1; backward compute 2 (1000-2000), collective 3.
  nlohmann::json events = nlohmann::json::array(
      {predicted_span(0, 0, "fwd", 0, 1000), predicted_span(1, 1, "fwd", 1000, 500),
       predicted_span(2, 0, "bwd", 1000, 1000), predicted_span(3, 1, "bwd", 2000, 500)});
  write_json(config / "pred" / "plan.trace.json", {{"traceEvents", events}});
  return config;
}

std::pair<int, std::string> run_script(const std::string& args) {
  return domino::test::run_python_script("pass-lag.py", args);
}

// Rank 0's forward ends at 1100 and 1300 us (mean 1200: +0.20 ms), its backward at 2400 and 2600 (mean
// 2500: +0.50 ms), the backward's compute op 1200 and 1300 us long (100 us idle in the first iteration). The
// ranks start the forward collective 100 and 300 us apart (median 200) and the backward one 800 and 1000
// apart (median 900).
void write_measured(const fs::path& config) {
  const nlohmann::json iterations = nlohmann::json::array({nlohmann::json::array({{0, 0, 0, 1100},
                                                                                  {0, 1, 1100, 1600},
                                                                                  {1, 1, 1200, 1600},
                                                                                  {0, 2, 1200, 2400},
                                                                                  {0, 3, 2400, 2900},
                                                                                  {1, 3, 3200, 3400}}),
                                                           nlohmann::json::array({{0, 0, 0, 1300},
                                                                                  {0, 1, 1300, 1800},
                                                                                  {1, 1, 1000, 1800},
                                                                                  {0, 2, 1300, 2600},
                                                                                  {0, 3, 2600, 3700},
                                                                                  {1, 3, 3600, 3700}})});
  write_json(config / "meas" / "plan.trace.json",
             {{"traceEvents", nlohmann::json::array()}, {"domino", {{"iteration_spans", iterations}}}});
}

TEST(PassLagScript, GivesEachBlocksLagAndTheRanksStartGapAtItsCollectives) {
  const fs::path config = make_config("ok");
  write_measured(config);
  const auto [code, out] = run_script(config.string() + " plan");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("plan (rank 0, 2 iterations)"), std::string::npos) << out;
  EXPECT_NE(out.find("fwd layer 0                 +0.20      200      300"), std::string::npos) << out;
  EXPECT_NE(out.find("bwd layer 0                 +0.50      900      300"), std::string::npos) << out;
  fs::remove_all(config);
}

TEST(PassLagScript, PhasesGiveEachPhasesTimeAndTheComputeBusyAndIdleInIt) {
  const fs::path config = make_config("phases");
  write_measured(config);
  const auto [code, out] = run_script(config.string() + " plan --phases");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("plan (2 iterations): per phase"), std::string::npos) << out;
  // Forward: predicted 1.0 ms (busy 1.0); rank 0 1.2 ms, all of it busy. Backward: from the forward's end,
  // 1.3 ms in both iterations, busy 1.2 and 1.3 ms. Rank 1 runs no compute op here.
  EXPECT_NE(out.find("  fwd            1.0     1.0       1.2     1.2     0.0       0.0     0.0     0.0"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  bwd            1.0     1.0       1.3     1.2     0.1"), std::string::npos) << out;
  fs::remove_all(config);
}

TEST(PassLagScript, ATraceWithoutIterationsOrUnreadableIsBadInput) {
  const fs::path config = make_config("bad");
  write_json(config / "meas" / "plan.trace.json", {{"traceEvents", nlohmann::json::array()}});
  const auto [code, out] = run_script(config.string() + " plan");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("no per-iteration spans"), std::string::npos) << out;
  std::ofstream(config / "meas" / "plan.trace.json") << "not json";
  const auto [bad_code, bad_out] = run_script(config.string() + " plan");
  EXPECT_EQ(bad_code, 2) << bad_out;
  EXPECT_NE(bad_out.find("unreadable trace"), std::string::npos) << bad_out;
  EXPECT_EQ(bad_out.find("Traceback"), std::string::npos) << bad_out;
  const auto [usage_code, usage_out] = run_script(config.string());  // no plan named
  EXPECT_EQ(usage_code, 2) << usage_out;
  fs::remove_all(config);
}

}  // namespace
