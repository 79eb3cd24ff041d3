// rank_fork.cpp: fork, join the namespace, rendezvous, run, report through files; the parent waits with a
// deadline and stops every child when one fails.
#include "executor/profiler/rank_fork.hpp"
#include "sim/base/files.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "executor/runtime/gloo_comm.hpp"
#include "executor/runtime/link_emulation.hpp"
#include "sim/base/error.hpp"
#include "sim/trace/timeline.hpp"

namespace domino::prof {

namespace {

namespace fs = std::filesystem;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void join_namespace(const std::string& ns) {
  const std::string path = "/var/run/netns/" + ns;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_runtime("cannot open network namespace " + path + ": " + std::strerror(errno));
  const int rc = ::setns(fd, CLONE_NEWNET);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw_runtime("cannot join network namespace " + ns + ": " + std::strerror(err));
}

// The child's whole life; never returns.
[[noreturn]] void child_main(int rank, const ForkOptions& o, const std::string& dir, const LinkEmulation* link,
                             const std::function<nlohmann::json(GlooComm&)>& body) {
  int rc = 0;
  try {
    CommConfig cc;
    cc.rank = rank;
    cc.world = o.ranks;
    cc.store_dir = dir + "/store";
    cc.timeout = std::chrono::milliseconds(120'000);
    if (link) {
      join_namespace(link->namespace_of(rank));
      cc.bind_address = link->address_of(rank);
    }
    GlooComm comm(cc);
    const nlohmann::json result = body(comm);
    write_file_atomic(dir + "/rank" + std::to_string(rank) + ".json", result.dump());
    comm.barrier("profiler: done");  // nobody tears the mesh down while a peer still reads from it
  } catch (const std::exception& e) {
    std::ofstream(dir + "/rank" + std::to_string(rank) + ".error") << e.what();
    rc = 1;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(rc);  // no atexit handlers: the parent owns the namespaces and the folder
}

}  // namespace

std::vector<nlohmann::json> run_ranks(const ForkOptions& o, const std::function<nlohmann::json(GlooComm&)>& body) {
  if (o.ranks < 1) throw_bad_input("--tp must be at least 1");
  TempDir dir("domino-profile");  // Gloo's FileStore must start empty
  fs::create_directory(dir.path() + "/store");
  std::optional<LinkEmulation> link;
  if (o.link_gbps > 0) {
    if (o.ranks < 2) throw_bad_input("--link-gbps needs at least 2 ranks (--tp 2 or more)");
    std::string why;
    if (!LinkEmulation::available(&why)) throw_runtime("--link-gbps: link emulation is not available here: " + why);
    LinkEmulation::remove_stale();
    LinkEmulation::install_signal_cleanup();
    LinkEmulationConfig lc;
    lc.ranks = o.ranks;
    lc.gbps = o.link_gbps;
    link.emplace(lc);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  const pid_t parent = ::getpid();
  for (int r = 0; r < o.ranks; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      for (pid_t p : pids) ::kill(p, SIGKILL);
      for (pid_t p : pids) ::waitpid(p, nullptr, 0);
      throw_runtime(std::string("fork failed: ") + std::strerror(errno));
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      child_main(r, o, dir.path(), link ? &*link : nullptr, body);
    }
    pids.push_back(pid);
  }
  // Wait for all; on the first failure or at the deadline, stop the rest.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
  std::vector<int> status(size_t(o.ranks), -1);
  int left = o.ranks;
  bool stopped = false;
  std::string failure;
  while (left > 0) {
    int st = 0;
    const pid_t pid = ::waitpid(-1, &st, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < o.ranks; ++r)
        if (pids[size_t(r)] == pid) {
          status[size_t(r)] = st;
          --left;
          if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) && failure.empty()) {
            const std::string msg = read_text(dir.path() + "/rank" + std::to_string(r) + ".error");
            failure = "measuring rank " + std::to_string(r) + " failed: " +
                      (msg.empty() ? (WIFSIGNALED(st) ? "killed by signal " + std::to_string(WTERMSIG(st)) : "exit status " + std::to_string(WEXITSTATUS(st))) : msg);
          }
        }
      continue;
    }
    if (pid < 0 && errno != EINTR) break;
    const bool late = std::chrono::steady_clock::now() > deadline;
    if (late && failure.empty()) failure = "the measurement took longer than " + std::to_string(o.timeout_s) + " s";
    if (!failure.empty() && !stopped) {
      stopped = true;
      for (int r = 0; r < o.ranks; ++r)
        if (status[size_t(r)] == -1) ::kill(pids[size_t(r)], SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!failure.empty()) throw_runtime(failure);
  std::vector<nlohmann::json> results;
  for (int r = 0; r < o.ranks; ++r) {
    const std::string text = read_text(dir.path() + "/rank" + std::to_string(r) + ".json");
    try {
      results.push_back(nlohmann::json::parse(text));
    } catch (const nlohmann::json::exception& e) {
      throw_runtime("measuring rank " + std::to_string(r) + " left an unreadable result: " + e.what());
    }
  }
  return results;
}

}  // namespace domino::prof
