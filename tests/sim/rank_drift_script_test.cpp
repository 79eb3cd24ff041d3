// rank_drift_script_test.cpp: scripts/rank-drift.py on a hand-made ops file (compute, a collective the next
// compute waits for, compute) whose times are known: one rank with the collective's constant wait, two ranks
// without drift (no wait), two drifting ranks (each pays the later rank at the collective and at the end:
// about the spread of a rank's compute over sqrt(pi) twice), the drift matched to the constant wait, and bad
// input (exit code 2).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/script_run.hpp"

namespace {

namespace fs = std::filesystem;

// 10 ms of compute, a collective of 5 ms transfer charged 1 ms of arrival wait, 10 ms of compute after it.
fs::path write_ops(const std::string& tag) {
  const fs::path path = fs::temp_directory_path() / ("domino_rank_drift_" + tag + std::to_string(getpid()));
  auto op = [](int index, const char* stream, nlohmann::json deps, double us, double wait) {
    return nlohmann::json{{"op", index},       {"id", "op" + std::to_string(index)},
                          {"stream", stream},  {"kind", "x"},
                          {"phase", "fwd"},    {"deps", deps},
                          {"duration_us", us}, {"arrival_wait_us", wait}};
  };
  const nlohmann::json ops = nlohmann::json::array({op(0, "compute", nlohmann::json::array(), 10000, 0),
                                                    op(1, "comm", nlohmann::json::array({0}), 5000, 1000),
                                                    op(2, "compute", nlohmann::json::array({1}), 10000, 0)});
  std::ofstream(path) << nlohmann::json{{"plan", "hand"}, {"tp", 2}, {"sync_us", 1000}, {"ops", ops}}.dump();
  return path;
}

std::pair<int, std::string> run_script(const std::string& args) {
  return domino::test::run_python_script("rank-drift.py", args);
}

// The drifting time of the hand-made ops' row, in ms.
double drifting_ms(const std::string& out) {
  const size_t row = out.find("  hand ");
  if (row == std::string::npos) return -1;
  double one = 0, drifting = 0;
  std::sscanf(out.c_str() + row, "  hand %lf %lf", &one, &drifting);
  return drifting;
}

TEST(RankDriftScript, WithoutDriftTheRanksWaitForNoOneAndTheConstantWaitIsTheDifference) {
  const fs::path ops = write_ops("zero");
  const auto [code, out] = run_script(ops.string() + " --diffusion 0");
  EXPECT_EQ(code, 0) << out;
  // 10 + 1 + 5 + 10 ms on one rank; 25 ms on two ranks that never drift.
  EXPECT_NE(out.find("  hand                         26.00     25.00    -1.00  -3.85  fwd -1.00        0"),
            std::string::npos)
      << out;
  fs::remove(ops);
}

TEST(RankDriftScript, DriftingRanksPayTheLaterRankAtEachMeeting) {
  const fs::path ops = write_ops("drift");
  // Each compute op's spread sqrt(1000 x 10000) = 3162 us per rank: the later of two ranks 1784 us after the
  // mean, at the collective and at the end: 25 + 2 x 1.78 ms (the mean over 400 draws).
  const auto [code, out] = run_script(ops.string() + " --diffusion 1000 --samples 400");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NEAR(drifting_ms(out), 25 + 2 * 1.784, 0.3) << out;
  fs::remove(ops);
}

TEST(RankDriftScript, AMatchedDriftCostsTheReferenceWhatItsConstantWaitDid) {
  const fs::path ops = write_ops("match");
  const auto [code, out] = run_script(ops.string() + " --match " + ops.string() + " --samples 200");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("hand as slow drifting as with its constant wait"), std::string::npos) << out;
  EXPECT_NEAR(drifting_ms(out), 26.0, 0.01) << out;
  fs::remove(ops);
}

TEST(RankDriftScript, BadUsageOrAnUnreadableFileIsExitCode2) {
  const fs::path ops = write_ops("bad");
  const auto [none_code, none_out] = run_script(ops.string());  // neither --diffusion nor --match
  EXPECT_EQ(none_code, 2) << none_out;
  EXPECT_NE(none_out.find("give either --diffusion D or --match OPS_JSON"), std::string::npos) << none_out;
  std::ofstream(ops) << "not json";
  const auto [bad_code, bad_out] = run_script(ops.string() + " --diffusion 1");
  EXPECT_EQ(bad_code, 2) << bad_out;
  EXPECT_NE(bad_out.find("not an ops file of domino-sim --ops-json"), std::string::npos) << bad_out;
  EXPECT_EQ(bad_out.find("Traceback"), std::string::npos) << bad_out;
  fs::remove(ops);
}

}  // namespace
