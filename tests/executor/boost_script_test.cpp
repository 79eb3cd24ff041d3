// boost_script_test.cpp: scripts/boosted (the timing runs' nice -20 session) stops with its caller: a
// signal to it reaches every process of the command's session, grandchildren included, so a stopped sweep
// leaves nothing running at high priority.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

// The bracket keeps the pattern from matching the shell that runs pgrep (its command line holds the pattern).
bool process_running(const std::string& marker) {
  return std::system(("pgrep -f '[" + marker.substr(0, 1) + "]" + marker.substr(1) + "' > /dev/null").c_str()) == 0;
}

// Runs `scripts/boosted` on a command whose child starts a long sleep named `marker`, stopped after a
// second by `timeout -s SIGNAL`; returns whether the sleep outlived it (killed afterwards either way).
bool grandchild_survives(const std::string& signal, const std::string& marker) {
  const std::string script = std::string(DOMINO_SOURCE_DIR) + "/scripts/boosted";
  const std::string cmd = "timeout -s " + signal + " 1 " + script + " bash -c 'bash -c \"exec -a " + marker +
                          " sleep 30\" & wait' > /dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  EXPECT_NE(rc, 0) << "the command was stopped, so it cannot have succeeded";
  bool running = false;
  for (int i = 0; i < 20 && !running; ++i) {  // the forwarded signal may take a moment to land
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    running = process_running(marker);
  }
  std::system(("pkill -f '[" + marker.substr(0, 1) + "]" + marker.substr(1) + "'").c_str());
  return running;
}

TEST(BoostScript, TimeoutStopsTheWholeSession) {
  if (std::system("command -v timeout > /dev/null && command -v pgrep > /dev/null") != 0)
    GTEST_SKIP() << "timeout or pgrep missing";
  EXPECT_FALSE(grandchild_survives("TERM", "domino-boost-term-" + std::to_string(::getpid())));
}

TEST(BoostScript, InterruptStopsTheWholeSession) {
  if (std::system("command -v timeout > /dev/null && command -v pgrep > /dev/null") != 0)
    GTEST_SKIP() << "timeout or pgrep missing";
  EXPECT_FALSE(grandchild_survives("INT", "domino-boost-int-" + std::to_string(::getpid())));
}

TEST(BoostScript, ReturnsTheCommandsExitStatus) {
  const std::string script = std::string(DOMINO_SOURCE_DIR) + "/scripts/boosted";
  EXPECT_EQ(std::system((script + " bash -c 'exit 3'").c_str()), 3 << 8);
  EXPECT_EQ(std::system((script + " true").c_str()), 0);
}

}  // namespace
