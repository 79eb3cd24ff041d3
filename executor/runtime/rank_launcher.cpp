// rank_launcher.cpp: fork, set the child up (parent-death signal, name, environment, namespace), run the
// body, hand its result and error back through files of the launch's folder; the parent reaps, stops the
// rest on the first failure and names it (see rank_launcher.hpp).
#include "executor/runtime/rank_launcher.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <sstream>
#include <thread>

#include "executor/runtime/link_emulation.hpp"
#include "sim/base/error.hpp"
#include "sim/base/files.hpp"

namespace domino {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Long enough for a rank to leave a collective cleanly, short enough that a failed job ends within seconds.
constexpr auto kStopGrace = std::chrono::seconds(3);
constexpr auto kPollInterval = std::chrono::milliseconds(20);
// How long the others may go on ending by themselves when every failure so far only lost its peer: the
// peer is failing too, and stopping it at once could kill it before it has written its own error.
constexpr auto kPeerLostGrace = std::chrono::seconds(2);

struct Child {
  pid_t pid = 0;
  int rank = 0;
  bool running = true;
  int status = 0;
  bool stopped_by_us = false;  // we signalled it: its death is a consequence, not a cause
};

// ---- interruption (SIGINT, SIGTERM, SIGHUP while ranks run) ----------------------------------------

constexpr int kInterruptSignals[] = {SIGINT, SIGTERM, SIGHUP};
volatile sig_atomic_t g_interrupt = 0;  // the signal that asked the running launch to stop; 0 if none
int g_interrupted_by = 0;               // the signal that ended the last interrupted launch

void on_interrupt(int sig) {
  if (!g_interrupt) g_interrupt = sig;
}

// For the length of one launch, an interrupting signal only asks the wait loop to stop the ranks: the
// launch then reaps them and unwinds (namespaces and its folder removed) before the signal is passed on.
// A signal ignored at the start (nohup) stays ignored.
class InterruptGuard {
 public:
  InterruptGuard() {
    g_interrupt = 0;
    for (size_t i = 0; i < std::size(kInterruptSignals); ++i) {
      ::sigaction(kInterruptSignals[i], nullptr, &previous_[i]);
      if (previous_[i].sa_handler == SIG_IGN) continue;
      struct sigaction action {};
      action.sa_handler = on_interrupt;
      sigemptyset(&action.sa_mask);
      action.sa_flags = SA_RESTART;
      ::sigaction(kInterruptSignals[i], &action, nullptr);
    }
  }
  ~InterruptGuard() { restore(); }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
  // What the process had before the launch; a forked rank calls it first, so that it dies of these signals.
  void restore() const {
    for (size_t i = 0; i < std::size(kInterruptSignals); ++i) ::sigaction(kInterruptSignals[i], &previous_[i], nullptr);
  }

 private:
  struct sigaction previous_[std::size(kInterruptSignals)] {};
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string result_path(const std::string& dir, int rank) { return dir + "/rank" + std::to_string(rank) + ".result"; }
std::string error_path(const std::string& dir, int rank) { return dir + "/rank" + std::to_string(rank) + ".error"; }
// Present when the rank's error was a lost connection to a peer (ErrorKind::PeerLost), not a cause.
std::string peer_lost_path(const std::string& dir, int rank) {
  return dir + "/rank" + std::to_string(rank) + ".peer-lost";
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

// What torchrun would set, so that code reading the environment (device choice by LOCAL_RANK) sees the
// same thing under either launcher; the process name tells the ranks apart in ps and tests.
void present_as_rank(const RankSlot& slot) {
  const std::string rank = std::to_string(slot.rank), world = std::to_string(slot.world);
  ::setenv("RANK", rank.c_str(), 1);
  ::setenv("WORLD_SIZE", world.c_str(), 1);
  ::setenv("LOCAL_RANK", rank.c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", world.c_str(), 1);
  char comm[16] = {};
  ::prctl(PR_GET_NAME, comm);
  const std::string name = ("rank" + rank + "." + comm).substr(0, 15);
  ::prctl(PR_SET_NAME, name.c_str());
}

// The rank process's whole life; never returns (no atexit handlers: the parent owns the folder and the
// namespaces, and a failed rank may still have threads blocked in a collective).
[[noreturn]] void rank_main(const RankSlot& slot, const std::string& dir, const LinkEmulation* link,
                            const RankBody& body) {
  int rc = 0;
  try {
    present_as_rank(slot);
    if (link) join_namespace(link->namespace_of(slot.rank));
    write_file_atomic(result_path(dir, slot.rank), body(slot));
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::PeerLost) std::ofstream{peer_lost_path(dir, slot.rank)};
    std::ofstream(error_path(dir, slot.rank)) << e.what();
    rc = e.exit_code();
  } catch (const std::exception& e) {
    std::ofstream(error_path(dir, slot.rank)) << e.what();
    rc = 1;
  } catch (...) {
    rc = 1;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(rc);
}

std::vector<Child> fork_ranks(const LaunchOptions& o, const std::string& dir, const LinkEmulation* link,
                              const InterruptGuard& interrupts, const RankBody& body) {
  std::fflush(stdout);  // or the children would print the parent's buffered output again
  std::fflush(stderr);
  const pid_t parent = ::getpid();
  std::vector<Child> children;
  for (int r = 0; r < o.ranks; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      const int err = errno;
      for (const Child& c : children) ::kill(c.pid, SIGKILL);
      for (const Child& c : children) ::waitpid(c.pid, nullptr, 0);
      throw_runtime(std::string("cannot start rank process ") + std::to_string(r) + ": fork failed: " +
                    std::strerror(err));
    }
    if (pid == 0) {
      // Die with the parent, whatever kills it; the check closes the race with a parent already gone.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      interrupts.restore();
      RankSlot slot{r, o.ranks, dir + "/store", link ? link->address_of(r) : "127.0.0.1"};
      rank_main(slot, dir, link, body);
    }
    children.push_back({pid, r});
  }
  return children;
}

// Reaps one child if it has ended; records a failure.
void reap(Child& c, std::vector<const Child*>* failures) {
  int status = 0;
  const pid_t got = ::waitpid(c.pid, &status, WNOHANG);
  if (got == 0 || (got < 0 && errno == EINTR)) return;
  c.running = false;
  c.status = got < 0 ? (1 << 8) : status;  // lost (reaped elsewhere): count as exit status 1
  if (!(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0)) failures->push_back(&c);
}

// How the wait ended, when not by every rank ending on its own.
struct WaitEnd {
  bool late = false;  // the deadline passed
  int interrupt = 0;  // the signal that interrupted the launch
};

// Whether every failure so far lost its peer (and so is a consequence of a failure still to be reaped).
bool only_peers_lost(const std::vector<const Child*>& failures, const std::string& dir) {
  for (const Child* c : failures)
    if (!fs::exists(peer_lost_path(dir, c->rank))) return false;
  return true;
}

// Reaps the children (only these: other children of the process are not ours to collect); on the first
// failure (after kPeerLostGrace when it only lost its peer), at the deadline or when interrupted, stops the
// rest (SIGTERM, then SIGKILL after kStopGrace).
WaitEnd wait_for_ranks(std::vector<Child>& children, std::vector<const Child*>* failures, int deadline_s,
                       const std::string& dir) {
  const auto start = Clock::now();
  std::optional<Clock::time_point> first_failure, stopping_since;
  bool killed = false;
  WaitEnd end;
  auto signal_running = [&](int sig) {
    for (Child& c : children)
      if (c.running) {
        ::kill(c.pid, sig);
        c.stopped_by_us = true;
      }
  };
  for (;;) {
    bool any_running = false;
    for (Child& c : children) {
      if (c.running) reap(c, failures);
      any_running = any_running || c.running;
    }
    if (!any_running) break;
    if (!stopping_since && deadline_s > 0 && Clock::now() - start > std::chrono::seconds(deadline_s)) end.late = true;
    if (!end.interrupt) end.interrupt = g_interrupt;
    if (!failures->empty() && !first_failure) first_failure = Clock::now();
    const bool failed = first_failure && (!only_peers_lost(*failures, dir) ||
                                          Clock::now() - *first_failure > kPeerLostGrace);
    if ((failed || end.late || end.interrupt) && !stopping_since) {
      stopping_since = Clock::now();
      signal_running(SIGTERM);
    }
    if (stopping_since && !killed && Clock::now() - *stopping_since > kStopGrace) {
      killed = true;
      signal_running(SIGKILL);
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  if (!end.interrupt) end.interrupt = g_interrupt;  // a signal that came as the last rank ended
  return end;
}

// "SIGTERM", "SIGKILL", ...; "SIG" and the number for a signal without a name.
std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return "SIG" + (abbrev ? std::string(abbrev) : std::to_string(sig));
}

// Removes what the ranks of a launch that did not succeed left half-written under `outputs`: the temporary
// files of write_file_atomic (atomic_temp_path) whose PID is one of those ranks. Complete files stay.
void remove_rank_temporaries(const std::vector<std::string>& outputs, const std::vector<Child>& children) {
  for (const std::string& output : outputs) {
    std::error_code ec;
    if (output.empty()) continue;
    if (!fs::is_directory(output, ec)) {
      for (const Child& c : children) fs::remove(atomic_temp_path(output, c.pid), ec);
      continue;
    }
    // A folder's files are not named in advance: a file is ours when it ends as a rank's temporaries do.
    std::vector<std::string> endings;
    for (const Child& c : children) endings.push_back(atomic_temp_path("", c.pid));
    std::vector<fs::path> ours;
    for (auto it = fs::recursive_directory_iterator(output, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (!it->is_regular_file(ec)) continue;
      for (const std::string& ending : endings)
        if (name.size() > ending.size() && name.ends_with(ending)) ours.push_back(it->path());
    }
    for (const fs::path& file : ours) fs::remove(file, ec);
  }
}

// When a rank wrote its error (nanoseconds; max when it wrote none).
int64_t error_written_ns(const std::string& dir, int rank) {
  struct stat st {};
  if (::stat(error_path(dir, rank).c_str(), &st) != 0) return std::numeric_limits<int64_t>::max();
  return int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

// The cause: a rank we did not stop, preferring one killed by a signal (its peers then fail on the broken
// connection at about the same moment), else the one that wrote its error first among those that failed for
// their own reason (a rank whose peer died fails on the broken connection, and may do so before the dying
// rank has written its error: it closes its connections as it unwinds), else the first error of all; null
// when we stopped them all (the deadline).
const Child* first_cause(const std::vector<const Child*>& failures, const std::string& dir) {
  for (const Child* c : failures)
    if (!c->stopped_by_us && WIFSIGNALED(c->status)) return c;
  const auto earliest = [&](bool own_reason) {
    const Child* first = nullptr;
    for (const Child* c : failures) {
      if (own_reason ? fs::exists(peer_lost_path(dir, c->rank)) : c->stopped_by_us) continue;
      if (!first || error_written_ns(dir, c->rank) < error_written_ns(dir, first->rank)) first = c;
    }
    return first;
  };
  // A rank stopped by us that still wrote an error of its own had failed before the signal reached it.
  const Child* own = earliest(true);
  if (own && error_written_ns(dir, own->rank) != std::numeric_limits<int64_t>::max()) return own;
  return earliest(false);
}

[[noreturn]] void throw_failure(const LaunchOptions& o, const std::string& dir, const Child* cause,
                                const std::vector<const Child*>& failures) {
  std::string message = o.rank_label + " " + std::to_string(cause->rank) + " " + describe_exit_status(cause->status);
  if (const std::string why = read_text(error_path(dir, cause->rank)); !why.empty()) message += ": " + why;
  message += "; the other ranks were stopped";
  for (const Child* c : failures)
    if (c != cause) message += "; " + o.rank_label + " " + std::to_string(c->rank) + " " + describe_exit_status(c->status);
  // A rank that refused its input (exit 2) makes the whole launch a bad-input failure.
  if (WIFEXITED(cause->status) && WEXITSTATUS(cause->status) == 2) throw_bad_input(message);
  throw_runtime(message);
}

std::optional<LinkEmulation> make_link(const LaunchOptions& o) {
  if (!(o.link_gbps > 0)) return std::nullopt;
  if (o.ranks < 2) throw_bad_input("an emulated link needs at least 2 ranks");
  std::string why;
  if (!LinkEmulation::available(&why)) throw_runtime("--link-gbps: link emulation is not available here: " + why);
  LinkEmulation::remove_stale();
  LinkEmulation::install_signal_cleanup();
  LinkEmulationConfig lc;
  lc.ranks = o.ranks;
  lc.gbps = o.link_gbps;
  return std::optional<LinkEmulation>(std::in_place, lc);
}

}  // namespace

int launch_interrupted_by() { return g_interrupted_by; }

std::string describe_exit_status(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const std::string number = std::to_string(sig), name = signal_name(sig);
    return "was killed by signal " + number + (name != "SIG" + number ? " (" + name + ")" : "");
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

std::vector<std::string> launch_ranks(const LaunchOptions& o, const RankBody& body) {
  if (o.ranks < 1) throw_bad_input("a launch needs at least 1 rank, not " + std::to_string(o.ranks));
  TempDir dir(o.temp_prefix);  // Gloo's FileStore must start empty: a fresh folder per launch
  fs::create_directory(dir.path() + "/store");
  const std::optional<LinkEmulation> link = make_link(o);
  const InterruptGuard interrupts;  // after the link: its own cleanup handler is what the guard restores
  std::vector<Child> children = fork_ranks(o, dir.path(), link ? &*link : nullptr, interrupts, body);
  std::vector<const Child*> failures;
  const WaitEnd end = wait_for_ranks(children, &failures, o.deadline_s, dir.path());
  if (end.interrupt || !failures.empty() || end.late) remove_rank_temporaries(o.output_paths, children);
  if (end.interrupt) {
    g_interrupted_by = end.interrupt;
    throw_runtime("interrupted by " + signal_name(end.interrupt) + ": the " + std::to_string(o.ranks) + " " +
                  o.rank_label + " process(es) were stopped");
  }
  const Child* cause = first_cause(failures, dir.path());
  if (!cause && end.late)
    throw_runtime("the " + o.rank_label + " processes took longer than " + std::to_string(o.deadline_s) +
                  " s; they were stopped");
  if (!failures.empty()) throw_failure(o, dir.path(), cause ? cause : failures.front(), failures);
  std::vector<std::string> results;
  for (int r = 0; r < o.ranks; ++r) results.push_back(read_text(result_path(dir.path(), r)));
  return results;
}

}  // namespace domino
