// launcher.cpp: starts, watches and stops the rank processes of one machine (see launcher.hpp).
#include "executor/job/launcher.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "executor/job/backends.hpp"
#include "executor/job/grad_check.hpp"
#include "executor/job/job.hpp"
#include "executor/runtime/link_emulation.hpp"
#include "sim/base/error.hpp"
#include "sim/base/files.hpp"

extern char** environ;

namespace domino {
namespace {

namespace fs = std::filesystem;

std::string self_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw_runtime("cannot find this program's path (/proc/self/exe): " + ec.message());
  return p.string();
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* abbrev = sigabbrev_np(sig);
    return "was killed by signal " + std::to_string(sig) + (abbrev ? std::string(" (SIG") + abbrev + ")" : "");
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env) {
  std::vector<std::string> env_text;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    if (key == "RANK" || key == "WORLD_SIZE" || key == "LOCAL_RANK" || key == "LOCAL_WORLD_SIZE") continue;
    env_text.push_back(kv);
  }
  env_text.insert(env_text.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> args, env;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  for (const auto& e : env_text) env.push_back(const_cast<char*>(e.c_str()));
  args.push_back(nullptr);
  env.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw_runtime(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    // Die with the launcher, whatever kills it; the check closes the race with a launcher already gone.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    ::execve(args[0], args.data(), env.data());
    const char msg[] = "domino-exec: error: cannot start a rank process\n";
    (void)!::write(2, msg, sizeof msg - 1);
    ::_exit(127);
  }
  return pid;
}

struct Child {
  pid_t pid = 0;
  int rank = 0;
  bool running = true;
  int status = 0;
};

// Reaps children; after the first failure stops the rest (SIGTERM, then SIGKILL after a grace period).
void wait_for_ranks(std::vector<Child>& children) {
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> stopping_since;
  std::vector<const Child*> failures;  // in the order they were seen
  auto running = [&] {
    int n = 0;
    for (const Child& c : children) n += c.running;
    return n;
  };
  bool killed = false;
  while (running() > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, stopping_since ? WNOHANG : 0);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) break;  // no children left
    if (pid > 0) {
      for (Child& c : children) {
        if (c.pid != pid) continue;
        c.running = false;
        c.status = status;
        if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) failures.push_back(&c);
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!failures.empty() && !stopping_since) {
      stopping_since = Clock::now();
      for (const Child& c : children)
        if (c.running) ::kill(c.pid, SIGTERM);
    }
    if (stopping_since && !killed && Clock::now() - *stopping_since > std::chrono::seconds(3)) {
      killed = true;
      for (const Child& c : children)
        if (c.running) ::kill(c.pid, SIGKILL);
    }
  }
  if (failures.empty()) return;
  // The cause is the rank that died by a signal we did not send, else the first non-zero exit.
  const Child* cause = failures.front();
  for (const Child* c : failures)
    if (WIFSIGNALED(c->status) && WTERMSIG(c->status) != SIGTERM) {
      cause = c;
      break;
    }
  std::string others;
  for (const Child* c : failures)
    if (c != cause) others += "; rank " + std::to_string(c->rank) + " " + describe_status(c->status);
  const std::string message = "rank " + std::to_string(cause->rank) + " " + describe_status(cause->status) +
                              "; the other ranks were stopped" + others;
  // A rank that refused its input (exit 2) makes the whole job a bad-input failure.
  if (WIFEXITED(cause->status) && WEXITSTATUS(cause->status) == 2) throw_bad_input(message);
  throw_runtime(message);
}

}  // namespace

void launch_ranks(const ExecOptions& options, int ranks) {
  TempDir run_dir("domino-exec");  // Gloo's FileStore must start empty
  fs::create_directory(run_dir.path() + "/store");
  std::optional<LinkEmulation> link;
  if (options.link_gbps > 0) {
    LinkEmulation::remove_stale();
    LinkEmulation::install_signal_cleanup();
    LinkEmulationConfig lc;
    lc.ranks = ranks;
    lc.gbps = options.link_gbps;
    lc.latency_us = options.link_latency_us;
    link.emplace(lc);
  }
  const std::string exe = self_exe();
  std::vector<Child> children;
  try {
    for (int r = 0; r < ranks; ++r) {
      ExecOptions w = options;
      w.rank_worker = true;
      w.run_dir = run_dir.path();
      w.bind_address = link ? link->address_of(r) : "127.0.0.1";
      std::vector<std::string> argv = link ? link->exec_prefix(r) : std::vector<std::string>{};
      argv.push_back(exe);
      for (const std::string& a : worker_arguments(w)) argv.push_back(a);
      const std::vector<std::string> env{"RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(ranks),
                                         "LOCAL_RANK=" + std::to_string(r), "LOCAL_WORLD_SIZE=" + std::to_string(ranks)};
      children.push_back({spawn(argv, env), r});
    }
  } catch (...) {
    for (Child& c : children) {
      ::kill(c.pid, SIGKILL);
      ::waitpid(c.pid, nullptr, 0);
    }
    throw;
  }
  wait_for_ranks(children);
}

int run_exec(const ExecOptions& given) {
  ExecOptions options = given;
  make_paths_absolute(&options);
  const Job job = resolve_job(options);  // bad input surfaces here, before any process starts
  make_backend(options.backend);          // an unknown or unavailable backend too
  if (options.check) return run_gradient_check(options, job);
  if (options.link_gbps > 0 || options.link_latency_us > 0) {
    if (job.ranks < 2) throw_bad_input("--link-gbps/--link-latency-us need at least 2 ranks");
  }
  launch_ranks(options, job.ranks);
  return 0;
}

}  // namespace domino
