// fidelity_noise_script_test.cpp: scripts/fidelity_noise.py on interleaved launches made up here with a known
// round-to-round spread: the spread it reads (drift over the launch left out), the split-half floor it
// expects against the floor of simulated launches, the rounds it asks for, and bad input (exit code 2).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "tests/script_run.hpp"

namespace {

namespace fs = std::filesystem;

using Launch = std::vector<std::vector<double>>;  // per plan, its iteration times in ms, round k at index k

// Plans whose true times are `base_ms`, each iteration scattered by `spread` (relative, normal) and the whole
// launch drifting linearly by `drift` from its first round to its last.
Launch simulated_launch(const std::vector<double>& base_ms, int rounds, double spread, double drift,
                        unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0.0, spread);
  Launch out(base_ms.size());
  for (int k = 0; k < rounds; ++k)
    for (size_t p = 0; p < base_ms.size(); ++p)
      out[p].push_back(base_ms[p] * (1.0 + drift * k / rounds) * (1.0 + noise(rng)));
  return out;
}

fs::path write_launch(const std::string& name, const Launch& launch) {
  nlohmann::json plans = nlohmann::json::array();
  for (size_t p = 0; p < launch.size(); ++p) {
    std::vector<double> us;
    for (double ms : launch[p]) us.push_back(ms * 1e3);
    plans.push_back({{"label", "plan" + std::to_string(p)}, {"iteration_time_us", {{"samples", us}}}});
  }
  const fs::path path =
      fs::temp_directory_path() / ("domino_noise_" + std::to_string(getpid()) + "_" + name + ".json");
  std::ofstream(path) << nlohmann::json{{"plans", plans}, {"rounds", launch.front().size()}}.dump();
  return path;
}

std::pair<int, std::string> run_script(const std::string& args) {
  return domino::test::run_python_script("fidelity_noise.py", args);
}

nlohmann::json outlook_of(const std::string& name, const Launch& launch) {
  const fs::path path = write_launch(name, launch);
  const auto [code, text] = run_script("--json " + path.string());
  fs::remove(path);
  EXPECT_EQ(code, 0) << text;
  return nlohmann::json::parse(text);
}

double mean(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}

// The split-half floor as the sweep measures it: each plan's mean over the odd rounds against its mean over
// the even rounds, the mean relative difference in percent.
double split_half_mape(const Launch& launch) {
  double sum = 0;
  for (const std::vector<double>& s : launch) {
    std::vector<double> odd, even;
    for (size_t k = 0; k < s.size(); ++k) (k % 2 ? even : odd).push_back(s[k]);
    sum += std::abs(mean(odd) - mean(even)) / mean(even);
  }
  return 100.0 * sum / launch.size();
}

TEST(FidelityNoiseScript, TheSpreadIsRoundToRoundAndLeavesTheLaunchsDriftOut) {
  // 5 % scatter, the machine 30 % slower at the end of the launch than at its start.
  const nlohmann::json o = outlook_of("drift", simulated_launch({100, 120, 150}, 1000, 0.05, 0.30, 7));
  EXPECT_NEAR(o["spread_pct"]["median"].get<double>(), 5.0, 0.6) << o.dump();
}

TEST(FidelityNoiseScript, TheExpectedFloorIsTheFloorOfSimulatedLaunches) {
  const std::vector<double> plans = {100, 103, 106, 109, 112, 115};
  const double spread = 0.05;
  const int rounds = 30, launches = 20;
  double measured = 0, expected = 0;
  for (int i = 0; i < launches; ++i) {
    const Launch launch = simulated_launch(plans, rounds, spread, 0.0, 100 + i);
    measured += split_half_mape(launch) / launches;
    expected += outlook_of("floor", launch)["expected_at_rounds"]["mape_pct"].get<double>() / launches;
  }
  // Two means of 15 normal samples each differ by 2 sqrt(2 / pi) sigma / sqrt(30) on average: 1.46 %.
  EXPECT_NEAR(expected, 200.0 * std::sqrt(2.0 / M_PI) * spread / std::sqrt(double(rounds)), 0.2);
  EXPECT_NEAR(expected, measured, 0.25 * measured);
}

TEST(FidelityNoiseScript, RoundsForTheTargetsFollowTheSpreadAndTheGaps) {
  // 4 % scatter: a 1.5 % floor takes (1.596 x 4 / 1.5)^2, about 18 rounds; plans 20 % apart are ordered at
  // once.
  const nlohmann::json apart = outlook_of("apart", simulated_launch({100, 120, 144, 173}, 200, 0.04, 0.0, 3));
  EXPECT_NEAR(apart["rounds_for_mape"]["rounds"].get<double>(), 18.0, 5.0) << apart.dump();
  EXPECT_LE(apart["rounds_for_tau"]["rounds"].get<int>(), 4) << apart.dump();
  // Two plans measured alike cannot be ordered with any number of rounds.
  Launch twins = simulated_launch({100, 150}, 60, 0.04, 0.0, 5);
  twins[1] = twins[0];
  const nlohmann::json tied = outlook_of("tied", twins);
  EXPECT_TRUE(tied["rounds_for_tau"]["rounds"].is_null()) << tied.dump();
  EXPECT_NEAR(tied["closest_pair"]["gap_pct"].get<double>(), 0.0, 1e-9);
}

TEST(FidelityNoiseScript, AFileThatIsNoLaunchSummaryIsExitCodeTwo) {
  const fs::path bad = fs::temp_directory_path() / ("domino_noise_bad_" + std::to_string(getpid()) + ".json");
  std::ofstream(bad) << "{\"plans\": [{\"label\": \"a\"}]}";
  for (const std::string& arg : {bad.string(), bad.string() + ".missing", std::string()}) {
    const auto [code, text] = run_script(arg);
    EXPECT_EQ(code, 2) << arg << ": " << text;
    EXPECT_EQ(text.find("Traceback"), std::string::npos) << text;
  }
  fs::remove(bad);
}

}  // namespace
