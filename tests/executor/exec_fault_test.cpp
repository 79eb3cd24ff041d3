// exec_fault_test.cpp: failures end the job cleanly. A rank killed with SIGKILL makes the launcher stop the
// others and exit 1 naming that rank and signal well within 30 s, leaving no process behind; a launcher
// killed with SIGKILL takes its ranks with it; NaN from a runaway learning rate stops the run naming the op
// and the rank.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <thread>

#include "exec_test_util.hpp"

namespace domino {
namespace {

using namespace exectest;

// Starts a long 2-rank run and waits until both rank processes are up; returns them by rank.
std::vector<pid_t> start_long_run(const TempDir& dir, Proc* launcher) {
  *launcher = start({model_file("tiny-gpt"), "--strategy", "domino-ds", "--iters", "1000000", "--quiet"}, dir / "log");
  std::vector<pid_t> ranks(2, -1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    for (pid_t c : children_of(launcher->pid)) {
      const int r = rank_of(c);
      if (r == 0 || r == 1) ranks[size_t(r)] = c;
    }
    if (ranks[0] > 0 && ranks[1] > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // Let them get into the iterations (rendezvous done, collectives in flight).
  std::this_thread::sleep_for(std::chrono::seconds(1));
  return ranks;
}

TEST(ExecFault, KilledRankStopsTheJobNamingIt) {
  TempDir dir;
  Proc launcher;
  const std::vector<pid_t> ranks = start_long_run(dir, &launcher);
  ASSERT_GT(ranks[0], 0);
  ASSERT_GT(ranks[1], 0);
  ASSERT_EQ(::kill(ranks[1], SIGKILL), 0);
  const Outcome o = finish(launcher, 60);
  EXPECT_FALSE(o.timed_out);
  EXPECT_LT(o.seconds, 30.0);
  EXPECT_EQ(o.exit_code, 1) << o.output;
  EXPECT_NE(o.output.find("rank 1 was killed by signal 9"), std::string::npos) << o.output;
  EXPECT_FALSE(alive(ranks[0])) << "rank 0 outlived the job";
}

TEST(ExecFault, KilledLauncherTakesItsRanksAlong) {
  TempDir dir;
  Proc launcher;
  const std::vector<pid_t> ranks = start_long_run(dir, &launcher);
  ASSERT_GT(ranks[0], 0);
  ASSERT_GT(ranks[1], 0);
  ASSERT_EQ(::kill(launcher.pid, SIGKILL), 0);
  finish(launcher, 10);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((alive(ranks[0]) || alive(ranks[1])) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(alive(ranks[0]));
  EXPECT_FALSE(alive(ranks[1]));
}

TEST(ExecFault, NanStopsTheRunNamingOpAndRank) {
  TempDir dir;
  const Outcome o = run({model_file("tiny-llama"), "--strategy", "domino-deep", "--optimizer", "sgd", "--lr", "1e30",
                         "--iters", "3", "--warmup", "0"},
                        dir / "log");
  EXPECT_EQ(o.exit_code, 1) << o.output;
  EXPECT_NE(o.output.find("NaN or Inf"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find(" of op "), std::string::npos) << o.output;
  EXPECT_NE(o.output.find(" in iteration "), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("rank "), std::string::npos) << o.output;
}

}  // namespace
}  // namespace domino
