// aligned_collectives_script_test.cpp: scripts/aligned-collectives.py on a hand-made sweep folder whose start
// gaps are known: it classes each collective as the simulator does (aligned: launched no later than the
// previous collective) and gives each class's median gap between the ranks' starts; an unreadable trace is
// exit code 2 with a message, no traceback.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/script_run.hpp"

namespace {

namespace fs = std::filesystem;

struct Op {
  int index;
  int stream;  // 0 compute, 1 communication
  std::vector<int> deps;
  double start_rank0, start_rank1;
};

nlohmann::json span(const Op& op, int rank) {
  nlohmann::json args{{"op", op.index}, {"code", op.stream == 1 ? "AllReduce" : "MatMul"}};
  if (!op.deps.empty()) args["deps"] = op.deps;
  return {
      {"name", "op" + std::to_string(op.index)},           {"ph", "X"},  {"pid", rank}, {"tid", op.stream},
      {"ts", rank == 0 ? op.start_rank0 : op.start_rank1}, {"dur", 100}, {"args", args}};
}

void write_trace(const fs::path& path, const std::vector<Op>& ops, int ranks) {
  nlohmann::json events = nlohmann::json::array();
  for (int rank = 0; rank < ranks; ++rank)
    for (const Op& op : ops) events.push_back(span(op, rank));
  fs::create_directories(path.parent_path());
  std::ofstream(path) << nlohmann::json{{"traceEvents", events}}.dump();
}

std::pair<int, std::string> run_script(const fs::path& sweep) {
  return domino::test::run_python_script("aligned-collectives.py", sweep.string());
}

TEST(AlignedCollectivesScript, GapsAreGivenPerClassAsTheSimulatorClassesThem) {
  const fs::path sweep = fs::temp_directory_path() / ("domino_aligned_" + std::to_string(getpid()));
  // Collective 1 after compute 0 (ranks 500 us apart), collective 2 queued behind it from the same compute
  // (10 us apart: aligned), collective 4 after compute 3 (800 us apart).
  const std::vector<Op> ops = {{0, 0, {}, 0, 0},
                               {1, 1, {0}, 100, 600},
                               {2, 1, {0}, 700, 710},
                               {3, 0, {1}, 800, 800},
                               {4, 1, {3}, 1000, 1800}};
  write_trace(sweep / "cfg" / "pred" / "plan.trace.json", ops, 1);
  write_trace(sweep / "cfg" / "meas" / "plan.trace.json", ops, 2);
  const auto [code, out] = run_script(sweep);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("aligned        all         1 collectives: start gap median 10 us"), std::string::npos)
      << out;
  EXPECT_NE(out.find("after compute  all         2 collectives: start gap median 650 us"), std::string::npos)
      << out;
  fs::remove_all(sweep);
}

TEST(AlignedCollectivesScript, AnUnreadableTraceIsBadInput) {
  const fs::path sweep = fs::temp_directory_path() / ("domino_aligned_bad_" + std::to_string(getpid()));
  fs::create_directories(sweep / "cfg" / "pred");
  fs::create_directories(sweep / "cfg" / "meas");
  std::ofstream(sweep / "cfg" / "pred" / "plan.trace.json") << R"({"traceEvents": [{"ph": "X"}]})";
  std::ofstream(sweep / "cfg" / "meas" / "plan.trace.json") << "not json";
  const auto [code, out] = run_script(sweep);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("unreadable trace"), std::string::npos) << out;
  EXPECT_EQ(out.find("Traceback"), std::string::npos) << out;
  const auto [empty_code, empty_out] = run_script(sweep / "cfg" / "meas");  // no configuration in it
  EXPECT_EQ(empty_code, 2) << empty_out;
  fs::remove_all(sweep);
}

}  // namespace
