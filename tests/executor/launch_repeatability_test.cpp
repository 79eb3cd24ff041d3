// launch_repeatability_test.cpp: scripts/launch-repeatability.py on hand-made sweep figures whose speedups
// are known: the mean and largest difference between two launches, Kendall's tau between them, the tuner's
// pick left out, and bad input refused with exit code 2 and no traceback.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/script_run.hpp"

namespace {

namespace fs = std::filesystem;

class LaunchRepeatability : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("domino_launch_repeatability_" + std::to_string(getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }

  // One sweep's fidelity.json: configuration "cfg", the given measured speedups over the baseline.
  fs::path launch(const std::string& name, const std::map<std::string, double>& speedups,
                  const std::string& baseline = "megatron-async") {
    nlohmann::json plans = nlohmann::json::array();
    for (const auto& [plan, measured] : speedups)
      plans.push_back({{"plan", plan}, {"predicted", 1.0}, {"measured", measured}});
    const nlohmann::json figures{{"speedup", {{"baseline", baseline}, {"rounds", 30}, {"plans", plans}}}};
    fs::create_directories(dir / name);
    std::ofstream(dir / name / "fidelity.json")
        << nlohmann::json{{"configurations", {{"cfg", {{"figures", figures}}}}}};
    return dir / name;
  }

  // The script's exit code and output.
  std::pair<int, std::string> run(const std::string& args) {
    return domino::test::run_python_script("launch-repeatability.py", args);
  }
};

TEST_F(LaunchRepeatability, TwoLaunchesDifferByTheirSpeedupsPlanByPlan) {
  // b moves p2 by +2 and p3 by +9 points, which swaps their order; "tuned" moves by 30 and is left out.
  const fs::path a = launch("a", {{"p1", 1.00}, {"p2", 0.95}, {"p3", 0.90}, {"tuned", 1.10}});
  const fs::path b = launch("b", {{"p1", 1.00}, {"p2", 0.97}, {"p3", 0.99}, {"tuned", 0.80}});
  const auto [rc, out] = run(a.string() + " " + b.string());
  ASSERT_EQ(rc, 0) << out;
  const size_t row = out.find("| cfg | ");
  ASSERT_NE(row, std::string::npos) << out;
  std::vector<std::string> cells;
  std::istringstream line(out.substr(row + 2, out.find('\n', row) - row - 2));
  for (std::string cell; std::getline(line, cell, '|');) cells.push_back(cell);
  ASSERT_EQ(cells.size(), 6u) << out;
  // Plans p1, p2, p3 (the baseline's speedup is 1 by definition): differences 0, +2, +9 points.
  EXPECT_EQ(std::stoi(cells[2]), 3) << out;
  EXPECT_NEAR(std::stod(cells[3]), (0 + 2 + 9) / 3.0, 0.051) << out;
  EXPECT_NE(cells[4].find("p3 +9.0"), std::string::npos) << out;
  // Kendall tau-b of the six pairs, the baseline (1.0) ranked among the plans: the baseline and p1 tied in
  // both, (p2, p3) discordant, four concordant: (4 - 1) / sqrt((6 - 1) (6 - 1)).
  EXPECT_EQ(cells[5], " 0.60 ") << out;
}

TEST_F(LaunchRepeatability, BadInputIsRefusedWithExitCodeTwo) {
  const fs::path a = launch("a", {{"p1", 1.0}});
  EXPECT_EQ(run(a.string()).first, 2);  // one launch: nothing to compare
  fs::create_directories(dir / "broken");
  std::ofstream(dir / "broken" / "fidelity.json") << "{";
  const auto [rc, out] = run(a.string() + " " + (dir / "broken").string());
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("not a fidelity sweep's figures"), std::string::npos) << out;
  EXPECT_EQ(out.find("Traceback"), std::string::npos) << out;
  fs::create_directories(dir / "empty");
  EXPECT_EQ(run(a.string() + " " + (dir / "empty").string()).first, 2);  // no shared configuration
  // Speedups over another baseline are not comparable; a launch of only the tuner's pick leaves nothing.
  const auto [other_rc, other] =
      run(a.string() + " " + launch("other", {{"p1", 1.0}}, "megatron-sync").string());
  EXPECT_EQ(other_rc, 2) << other;
  EXPECT_NE(other.find("different baselines"), std::string::npos) << other;
  EXPECT_EQ(
      run(launch("t1", {{"tuned", 1.0}}).string() + " " + launch("t2", {{"tuned", 0.9}}).string()).first, 2);
}

}  // namespace
