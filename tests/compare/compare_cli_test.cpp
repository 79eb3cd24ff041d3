// compare_cli_test.cpp: the domino-compare binary end to end: outputs written, exit codes (0 ok,
// 2 bad input or usage) and error messages that name the offending file.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/trace/timeline.hpp"
#include "tests/compare/trace_builders.hpp"

namespace domino {
namespace {

namespace fs = std::filesystem;

struct ToolRun {
  int exit_code;
  std::string out, err;
};

class CompareCli : public ::testing::Test {
 protected:
  void SetUp() override {
    bin = std::string(DOMINO_BIN_DIR) + "/domino-compare";
    if (!fs::exists(bin)) GTEST_SKIP() << bin << " not built";
    dir = fs::temp_directory_path() / ("domino_compare_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir);
  }
  void TearDown() override {
    if (!dir.empty()) fs::remove_all(dir);
  }
  static std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  ToolRun run(const std::string& args) {
    std::string cmd = bin + " " + args + " > " + (dir / "out").string() + " 2> " + (dir / "err").string();
    int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir / "out"), slurp(dir / "err")};
  }
  std::string bin;
  fs::path dir;
  const std::string predicted = test::trace_data("predicted_small.json");
  const std::string measured = test::trace_data("measured_small.json");
};

TEST_F(CompareCli, WritesReportMergedTraceAndJson) {
  ToolRun r = run(predicted + " " + measured + " -o " + (dir / "r.html").string() + " --merged " +
              (dir / "m.json").string() + " --json " + (dir / "s.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("iteration time (us)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("+14.5%"), std::string::npos) << r.out;  // the mean of 158, 160, 163 us over 140
  EXPECT_NE(slurp(dir / "r.html").find("<svg"), std::string::npos);
  auto figures = nlohmann::json::parse(slurp(dir / "s.json"));
  EXPECT_DOUBLE_EQ(figures["op_error_median_pct"].get<double>(), 20);
  EXPECT_EQ(read_trace((dir / "m.json").string()).events.size(), 54u);
  for (const auto& entry : fs::directory_iterator(dir))  // no temporary files left behind
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
}

TEST_F(CompareCli, RankOption) {
  ToolRun r = run(predicted + " " + measured + " --rank 1 --json " + (dir / "s.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(dir / "s.json"))["critical_path"]["measured_rank"], 1);
  ToolRun missing = run(predicted + " " + measured + " --rank 4");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("no rank 4"), std::string::npos) << missing.err;
}

TEST_F(CompareCli, MalformedTraceExitsTwoNamingTheFile) {
  std::string bad = test::trace_data("malformed_negative_dur.json");
  ToolRun r = run(predicted + " " + bad);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("domino-compare: error: " + bad), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("negative \"dur\""), std::string::npos) << r.err;
}

TEST_F(CompareCli, UsageErrorsExitTwo) {
  EXPECT_EQ(run(predicted).exit_code, 2);
  ToolRun r = run(predicted + " " + measured + " --no-such-flag");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no-such-flag"), std::string::npos) << r.err;
  EXPECT_EQ(run("--help").exit_code, 0);
}

}  // namespace
}  // namespace domino
