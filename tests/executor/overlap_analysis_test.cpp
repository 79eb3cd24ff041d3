// overlap_analysis_test.cpp: scripts/overlap-analysis.py's hand-over table on a hand-made measured trace
// whose waits are known: who got the core as a collective that a compute op stood waiting for ended.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/script_run.hpp"

namespace {

namespace fs = std::filesystem;

struct Span {
  int op;
  int stream;  // 0 compute, 1 communication
  const char* cat;
  double ts, dur;
  std::vector<int> deps;
};

nlohmann::json event(const Span& s, int rank) {
  nlohmann::json args{{"op", s.op}, {"bytes", 1024}};
  if (!s.deps.empty()) args["deps"] = s.deps;
  return {{"name", "op" + std::to_string(s.op)},
          {"cat", s.cat},
          {"ph", "X"},
          {"pid", rank},
          {"tid", s.stream},
          {"ts", s.ts},
          {"dur", s.dur},
          {"args", args}};
}

// The rows of the script's hand-over table: label -> its cells after the label.
std::vector<std::string> row_of(const std::string& out, const std::string& label) {
  const size_t table = out.find("hand-overs:");
  if (table == std::string::npos) return {};
  std::istringstream lines(out.substr(table));
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(label + " ", 0) != 0 || line.find_first_not_of(' ', label.size()) == std::string::npos)
      continue;
    if (!std::isdigit(static_cast<unsigned char>(line[line.find_first_not_of(' ', label.size())]))) continue;
    std::istringstream cells(line.substr(label.size()));
    std::vector<std::string> out_cells;
    for (std::string c; cells >> c;) out_cells.push_back(c);
    return out_cells;
  }
  return {};
}

TEST(OverlapAnalysis, HandOversSayWhoGotTheCoreAsTheAwaitedCollectiveEnded) {
  const fs::path dir = fs::temp_directory_path() / ("domino_overlap_analysis_" + std::to_string(getpid()));
  fs::create_directories(dir / "meas");
  // Rank 0: compute op 3 waits for collective 1 (ends at 300); collective 2 is ready then (its dep ended at
  // 100) and starts at once, op 3 only 100 us later. Compute op 4 waits for collective 2 (ends at 500) and
  // starts 20 us after it; the next collective, 5, waits for op 4 itself: nothing ready at the hand-over.
  // Rank 1: the same hand-over, the compute op first (40 us) and the collective after it (160 us).
  const std::vector<Span> rank0 = {{0, 0, "gemm", 0, 100, {}},          {1, 1, "allreduce", 100, 200, {0}},
                                   {2, 1, "allreduce", 300, 200, {0}},  {3, 0, "gemm", 400, 50, {1}},
                                   {4, 0, "elementwise", 520, 30, {2}}, {5, 1, "allreduce", 700, 100, {4}}};
  const std::vector<Span> rank1 = {{0, 0, "gemm", 0, 100, {}},
                                   {1, 1, "allreduce", 100, 200, {0}},
                                   {2, 1, "allreduce", 460, 200, {0}},
                                   {3, 0, "gemm", 340, 50, {1}}};
  nlohmann::json events = nlohmann::json::array();
  for (const Span& s : rank0) events.push_back(event(s, 0));
  for (const Span& s : rank1) events.push_back(event(s, 1));
  std::ofstream(dir / "meas" / "plan.trace.json") << nlohmann::json{{"traceEvents", events}}.dump();

  const auto [code, text] = domino::test::run_python_script("overlap-analysis.py", dir.string());
  ASSERT_EQ(code, 0) << text;
  // ready: n, collective first, compute start mean and median, next collective start mean and median
  const std::vector<std::string> ready = row_of(text, "ready");
  ASSERT_EQ(ready.size(), 6u) << text;
  EXPECT_EQ(ready[0], "2");
  EXPECT_EQ(ready[1], "50%");
  EXPECT_EQ(std::stod(ready[2]), 70);  // (100 + 40) / 2
  EXPECT_EQ(std::stod(ready[4]), 80);  // (0 + 160) / 2
  const std::vector<std::string> idle = row_of(text, "not ready");
  ASSERT_EQ(idle.size(), 6u) << text;
  EXPECT_EQ(idle[0], "1");
  EXPECT_EQ(idle[1], "0%");
  EXPECT_EQ(std::stod(idle[2]), 20);
  EXPECT_EQ(std::stod(idle[4]), 200);
  fs::remove_all(dir);
}

// A file that is not a domino trace, or none at all: a message and exit code 2, no traceback.
TEST(OverlapAnalysis, AnUnreadableTraceIsBadInput) {
  const fs::path bad =
      fs::temp_directory_path() / ("domino_overlap_bad_" + std::to_string(getpid()) + ".json");
  std::ofstream(bad) << R"({"traceEvents": [{"ph": "X"}]})";
  for (const fs::path& input : {bad, bad.parent_path() / "domino_no_such_trace.json"}) {
    const auto [code, text] = domino::test::run_python_script("overlap-analysis.py", input.string());
    EXPECT_EQ(code, 2) << text;
    EXPECT_NE(text.find("unreadable trace"), std::string::npos) << text;
    EXPECT_EQ(text.find("Traceback"), std::string::npos) << text;
  }
  fs::remove(bad);
}

}  // namespace
