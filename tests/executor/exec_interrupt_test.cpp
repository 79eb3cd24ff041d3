// exec_interrupt_test.cpp: Ctrl-C (SIGINT to the whole process group, as a terminal sends it) or SIGTERM to
// domino-exec while its ranks train: it stops and reaps its ranks, removes its emulated link's namespaces
// and its launch folder, leaves only complete output files, and ends by that same signal.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "exec_test_util.hpp"
#include "executor/runtime/link_emulation.hpp"
#include "executor/runtime/tensor_dump.hpp"

namespace domino {
namespace {

using namespace exectest;
namespace fs = std::filesystem;

// A long 2-rank run writing every output domino-exec has; returns once both ranks have begun writing the
// dumps of their first iteration (so rendezvous is done and they are training). ranks: their pids.
Proc start_long_run(const TempDir& dir, bool link, std::vector<pid_t>* ranks) {
  fs::create_directories(dir / "out");
  fs::create_directories(dir / "tmp");
  std::vector<std::string> argv{exec_bin(), model_file("tiny-gpt"), "--strategy", "domino-ds", "--iters", "1000000",
                                "--quiet", "--trace", dir / "out/t.json", "--json", dir / "out/s.json",
                                "--dump-tensors", dir / "out/dump", "--dump-iter", "0"};
  if (link) argv.insert(argv.end(), {"--link-gbps", "1"});
  const Proc launcher = start_program(argv, dir / "log", {"TMPDIR=" + (dir / "tmp")}, {}, /*own_group=*/true);
  ranks->assign(2, -1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  const auto dumping = [&](int r) {
    std::error_code ec;
    const std::string d = dir / ("out/dump/rank" + std::to_string(r));
    return fs::is_directory(d, ec) && !fs::is_empty(d, ec);
  };
  while (std::chrono::steady_clock::now() < deadline) {
    for (pid_t c : children_of(launcher.pid))
      if (const int r = rank_of(c); r == 0 || r == 1) (*ranks)[size_t(r)] = c;
    if ((*ranks)[0] > 0 && (*ranks)[1] > 0 && dumping(0) && dumping(1)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return launcher;
}

// Processes whose process group is `pgid` (/proc/PID/stat, field 5).
std::vector<pid_t> group_members(pid_t pgid) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = read_text(e.path().string() + "/stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    std::string state;
    long ppid = 0, pgrp = 0;
    if (rest >> state >> ppid >> pgrp && pgrp == pgid && state != "Z") out.push_back(pid_t(std::stol(name)));
  }
  return out;
}

void expect_only_complete_outputs(const TempDir& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir / "out")) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    EXPECT_EQ(name.find(".tmp."), std::string::npos) << "a write cut short was left: " << e.path();
    if (e.path().extension() == ".json") {
      EXPECT_NO_THROW(nlohmann::json::parse(read_text(e.path().string()))) << e.path();
    }
    if (e.path().extension() == ".npy") {
      // read_npy refuses a file whose data is shorter or longer than its header's shape.
      EXPECT_NO_THROW(read_npy(e.path().string())) << e.path();
    }
  }
}

void expect_nothing_left(const TempDir& dir, const Proc& launcher, const std::vector<pid_t>& ranks) {
  for (pid_t r : ranks) EXPECT_FALSE(alive(r)) << "rank process " << r << " outlived the launcher";
  EXPECT_TRUE(group_members(launcher.pid).empty()) << "a process of the launcher's group is left";
  EXPECT_TRUE(fs::is_empty(dir / "tmp")) << "the launch folder was left under TMPDIR";
  const std::string prefix = "dmn" + std::to_string(launcher.pid) + "-";
  if (fs::exists("/run/netns")) {
    for (const auto& e : fs::directory_iterator("/run/netns")) {
      EXPECT_NE(e.path().filename().string().rfind(prefix, 0), 0u) << "namespace left: " << e.path();
    }
  }
  expect_only_complete_outputs(dir);
}

TEST(ExecInterrupt, CtrlCStopsEverythingAndEndsBySigint) {
  TempDir dir;
  std::vector<pid_t> ranks;
  const Proc launcher = start_long_run(dir, false, &ranks);
  ASSERT_GT(ranks[0], 0) << read_text(dir / "log");
  ASSERT_GT(ranks[1], 0) << read_text(dir / "log");
  ASSERT_EQ(::kill(-launcher.pid, SIGINT), 0);  // the whole group, as a terminal's Ctrl-C
  const Outcome o = finish(launcher, 60);
  EXPECT_FALSE(o.timed_out);
  EXPECT_EQ(o.signal, SIGINT) << "exit code " << o.exit_code << ": " << o.output;
  EXPECT_NE(o.output.find("interrupted by SIGINT"), std::string::npos) << o.output;
  expect_nothing_left(dir, launcher, ranks);
}

TEST(ExecInterrupt, SigtermStopsEverythingAndEndsBySigterm) {
  std::string why;
  const bool link = LinkEmulation::available(&why);
  if (!link) std::cerr << "over loopback: link emulation unavailable: " << why << "\n";
  TempDir dir;
  std::vector<pid_t> ranks;
  const Proc launcher = start_long_run(dir, link, &ranks);
  ASSERT_GT(ranks[0], 0) << read_text(dir / "log");
  ASSERT_GT(ranks[1], 0) << read_text(dir / "log");
  ASSERT_EQ(::kill(launcher.pid, SIGTERM), 0);  // the launcher alone, as a batch system stops a job
  const Outcome o = finish(launcher, 60);
  EXPECT_FALSE(o.timed_out);
  EXPECT_EQ(o.signal, SIGTERM) << "exit code " << o.exit_code << ": " << o.output;
  EXPECT_NE(o.output.find("interrupted by SIGTERM"), std::string::npos) << o.output;
  expect_nothing_left(dir, launcher, ranks);
}

}  // namespace
}  // namespace domino
