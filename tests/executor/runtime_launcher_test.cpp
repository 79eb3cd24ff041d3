// runtime_launcher_test.cpp: the one rank launcher (executor/runtime/rank_launcher.hpp) on its own: every
// rank's result comes back by rank, with the rank's environment and a fresh rendezvous folder under $TMPDIR;
// a rank that fails is named with how it died and its message while the others are stopped; bad input in
// a rank is bad input for the launch; a launch past its deadline is stopped; an interrupted launch cleans up.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "executor/runtime/rank_launcher.hpp"
#include "sim/base/error.hpp"
#include "sim/base/files.hpp"

namespace domino {
namespace {

namespace fs = std::filesystem;

// Sets TMPDIR for the test's lifetime, then restores it.
class ScopedTmpdir {
 public:
  explicit ScopedTmpdir(const std::string& dir) {
    if (const char* old = std::getenv("TMPDIR")) old_ = old;
    ::setenv("TMPDIR", dir.c_str(), 1);
  }
  ~ScopedTmpdir() {
    if (old_) ::setenv("TMPDIR", old_->c_str(), 1);
    else ::unsetenv("TMPDIR");
  }

 private:
  std::optional<std::string> old_;
};

[[noreturn]] void sleep_until_stopped() {
  for (;;) ::pause();
}

Error launch_expecting_error(const LaunchOptions& o, const RankBody& body) {
  try {
    launch_ranks(o, body);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "the launch did not fail";
  return Error(ErrorKind::Runtime, "");
}

TEST(RankLauncher, ReturnsEveryRanksResultByRankInAFreshFolderUnderTmpdir) {
  TempDir outer("launcher-test");
  const ScopedTmpdir tmpdir(outer.path());
  LaunchOptions o;
  o.ranks = 3;
  const std::vector<std::string> results = launch_ranks(o, [](const RankSlot& slot) {
    const bool empty = fs::is_empty(slot.rendezvous_dir);
    return std::to_string(slot.rank) + "/" + std::to_string(slot.world) + " " + std::getenv("RANK") + " " +
           std::getenv("WORLD_SIZE") + " " + slot.bind_address + " " + (empty ? "empty " : "used ") +
           slot.rendezvous_dir;
  });
  ASSERT_EQ(results.size(), 3u);
  std::string first_dir;
  for (int r = 0; r < 3; ++r) {
    const std::string prefix = std::to_string(r) + "/3 " + std::to_string(r) + " 3 127.0.0.1 empty ";
    ASSERT_EQ(results[size_t(r)].rfind(prefix, 0), 0u) << results[size_t(r)];
    const std::string dir = results[size_t(r)].substr(prefix.size());
    EXPECT_EQ(dir.rfind(outer.path() + "/", 0), 0u) << dir << " is not under TMPDIR " << outer.path();
    if (r == 0) first_dir = dir;
    EXPECT_EQ(dir, first_dir) << "the ranks of one launch share one rendezvous folder";
  }
  EXPECT_FALSE(fs::exists(first_dir)) << "the launch's folder outlived it";
  // A second launch gets a fresh folder.
  const std::vector<std::string> again = launch_ranks(o, [](const RankSlot& slot) { return slot.rendezvous_dir; });
  EXPECT_NE(again[0], first_dir);
}

TEST(RankLauncher, FailedRankIsNamedWithItsMessageAndTheOthersAreStopped) {
  TempDir dir("launcher-test");
  LaunchOptions o;
  o.ranks = 3;
  const std::string pids = dir.path() + "/pid";
  const Error e = launch_expecting_error(o, [&](const RankSlot& slot) -> std::string {
    if (slot.rank == 1) {
      // Fail only once the others are up, so that they have to be stopped.
      while (!fs::exists(pids + "0") || !fs::exists(pids + "2")) ::usleep(10'000);
      throw_runtime("rank 1 broke on purpose");
    }
    write_file_atomic(pids + std::to_string(slot.rank), std::to_string(::getpid()));
    sleep_until_stopped();
  });
  EXPECT_EQ(e.kind(), ErrorKind::Runtime);
  const std::string what = e.what();
  EXPECT_EQ(what.rfind("rank 1 exited with status 1: rank 1 broke on purpose", 0), 0u) << what;
  EXPECT_NE(what.find("the other ranks were stopped"), std::string::npos) << what;
  for (int r : {0, 2}) {
    std::ifstream in(pids + std::to_string(r));
    pid_t pid = 0;
    in >> pid;
    ASSERT_GT(pid, 0);
    EXPECT_NE(::kill(pid, 0), 0) << "rank " << r << " outlived the launch";
  }
}

TEST(RankLauncher, RankKilledBySignalIsTheCause) {
  LaunchOptions o;
  o.ranks = 2;
  const Error e = launch_expecting_error(o, [](const RankSlot& slot) -> std::string {
    if (slot.rank == 0) sleep_until_stopped();
    ::raise(SIGKILL);
    return "";
  });
  const std::string what = e.what();
  EXPECT_EQ(what.rfind("rank 1 was killed by signal 9 (SIGKILL)", 0), 0u) << what;
}

// A rank whose connection broke fails first, but only because its peer is failing: the launch names the
// peer's own error, and does not stop the peer before it has written it.
TEST(RankLauncher, APeersOwnErrorIsTheCauseBeforeALostConnection) {
  LaunchOptions o;
  o.ranks = 2;
  const Error e = launch_expecting_error(o, [](const RankSlot& slot) -> std::string {
    if (slot.rank == 0) throw_peer_lost("rank 0: connection closed by peer");
    ::usleep(300'000);
    throw_runtime("rank 1 found no device");
  });
  EXPECT_EQ(e.kind(), ErrorKind::Runtime);
  const std::string what = e.what();
  EXPECT_EQ(what.rfind("rank 1 exited with status 1: rank 1 found no device", 0), 0u) << what;
}

// Only a lost connection and the peer still running: after a short grace the peer is stopped and the lost
// connection is what the launch reports.
TEST(RankLauncher, ALostConnectionAloneStillStopsTheOthers) {
  LaunchOptions o;
  o.ranks = 2;
  const Error e = launch_expecting_error(o, [](const RankSlot& slot) -> std::string {
    if (slot.rank == 0) throw_peer_lost("rank 0: connection closed by peer");
    sleep_until_stopped();
  });
  const std::string what = e.what();
  EXPECT_EQ(what.rfind("rank 0 exited with status 1: rank 0: connection closed by peer", 0), 0u) << what;
  EXPECT_NE(what.find("rank 1 was killed by signal 15 (SIGTERM)"), std::string::npos) << what;
}

TEST(RankLauncher, BadInputInARankIsBadInputForTheLaunch) {
  LaunchOptions o;
  o.ranks = 2;
  o.rank_label = "measuring rank";
  const Error e = launch_expecting_error(o, [](const RankSlot& slot) -> std::string {
    if (slot.rank == 0) throw_bad_input("no such model");
    sleep_until_stopped();
  });
  EXPECT_EQ(e.kind(), ErrorKind::BadInput);
  EXPECT_EQ(std::string(e.what()).rfind("measuring rank 0 exited with status 2: no such model", 0), 0u) << e.what();
}

TEST(RankLauncher, DeadlineStopsEveryRank) {
  LaunchOptions o;
  o.ranks = 2;
  o.deadline_s = 1;
  const Error e = launch_expecting_error(o, [](const RankSlot&) -> std::string { sleep_until_stopped(); });
  EXPECT_EQ(e.kind(), ErrorKind::Runtime);
  EXPECT_NE(std::string(e.what()).find("took longer than 1 s"), std::string::npos) << e.what();
}

// A signal to the launching process while its ranks run: the ranks are stopped, the half-written files of
// their outputs removed (complete ones kept), the launch folder removed, the process's own handling of the
// signal restored; the launch says it was interrupted and by what.
TEST(RankLauncher, InterruptStopsTheRanksAndRemovesTheirHalfWrittenFiles) {
  TempDir out("launcher-out");
  TempDir outer("launcher-test");
  const ScopedTmpdir tmpdir(outer.path());
  struct sigaction before {};
  ::sigaction(SIGINT, nullptr, &before);
  LaunchOptions o;
  o.ranks = 2;
  o.output_paths = {out.path() + "/summary.json", out.path() + "/dump"};
  fs::create_directory(out.path() + "/dump");
  const std::string other = out.path() + "/summary.json.tmp.1";  // not a rank's: stays
  std::ofstream(other) << "x";
  const Error e = launch_expecting_error(o, [&](const RankSlot& slot) -> std::string {
    const std::string pid = std::to_string(::getpid());
    if (slot.rank == 0) {
      write_file_atomic(out.path() + "/summary.json", "{}");
      std::ofstream(out.path() + "/summary.json.tmp." + pid) << "{\"cut";
    } else {
      std::ofstream(out.path() + "/dump/w.npy.tmp." + pid) << "half";
      while (!fs::exists(out.path() + "/summary.json")) ::usleep(10'000);
      ::kill(::getppid(), SIGINT);
    }
    sleep_until_stopped();
  });
  EXPECT_EQ(e.kind(), ErrorKind::Runtime);
  EXPECT_EQ(std::string(e.what()).rfind("interrupted by SIGINT: the 2 rank process(es) were stopped", 0), 0u) << e.what();
  EXPECT_EQ(launch_interrupted_by(), SIGINT);
  std::vector<std::string> left;
  for (const auto& f : fs::recursive_directory_iterator(out.path()))
    if (f.is_regular_file()) left.push_back(f.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"summary.json", "summary.json.tmp.1"}));
  EXPECT_TRUE(fs::is_empty(outer.path())) << "the launch folder was left";
  struct sigaction after {};
  ::sigaction(SIGINT, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler) << "SIGINT's handling was not restored";
}

TEST(RankLauncher, RefusesNoRanks) {
  LaunchOptions o;
  o.ranks = 0;
  const Error e = launch_expecting_error(o, [](const RankSlot&) { return std::string(); });
  EXPECT_EQ(e.kind(), ErrorKind::BadInput);
}

}  // namespace
}  // namespace domino
