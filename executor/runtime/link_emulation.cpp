// link_emulation.cpp: builds and removes the emulated interconnect (namespaces, veth, bridge, tbf) by
// running iproute2's `ip` and `tc` without a shell, plus the process-wide registry that lets signal
// handlers and exit() remove live namespaces, and removal of leftovers from dead runs.
#include "executor/runtime/link_emulation.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "sim/base/error.hpp"

extern char** environ;

namespace domino {
namespace {

// Where `ip netns add` keeps its bind mounts (iproute2's NETNS_RUN_DIR).
constexpr const char* kNetnsDir = "/var/run/netns";
constexpr const char* kLinkName = "dmnlink";   // the veth end inside every rank namespace
constexpr const char* kBridgeName = "dmnbr";   // the bridge inside the bridge namespace
constexpr int kMtu = 9000;                     // below this TCP reorders over tbf and loses 40-60%
constexpr int kMaxRanks = 250;                 // one /24 per run
constexpr double kLargestGsoPacket = 65536;    // the kernel's default gso_max_size

// ---- running ip / tc -------------------------------------------------------------------------

std::string find_tool(const char* name) {
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH")) {
    std::string p = path;
    for (size_t start = 0; start <= p.size();) {
      size_t end = p.find(':', start);
      if (end == std::string::npos) end = p.size();
      if (end > start) dirs.push_back(p.substr(start, end - start));
      start = end + 1;
    }
  }
  // root's PATH in containers and cron often lacks the sbin folders where iproute2 lives
  for (const char* d : {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}) dirs.emplace_back(d);
  for (const auto& d : dirs) {
    std::string candidate = d + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

struct Tools {
  std::string ip, tc;
};

const Tools& tools() {
  static const Tools t{find_tool("ip"), find_tool("tc")};
  return t;
}

std::string render(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// Runs argv (argv[0] an absolute path) with `input` as its stdin; returns its exit status and its
// stdout+stderr. The input sits in a memory file, not a pipe: a child that fails early cannot leave
// us writing into a closed pipe (SIGPIPE).
int run_command(const std::vector<std::string>& argv, const std::string& input, std::string* output) {
  int in = memfd_create("dmn-batch", MFD_CLOEXEC);
  if (in < 0) throw_runtime(std::string("link emulation: memfd_create: ") + std::strerror(errno));
  if (write(in, input.data(), input.size()) != static_cast<ssize_t>(input.size()) || lseek(in, 0, SEEK_SET) != 0) {
    close(in);
    throw_runtime(std::string("link emulation: cannot buffer commands: ") + std::strerror(errno));
  }
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in);
    throw_runtime(std::string("link emulation: pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, out[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  close(in);
  if (rc != 0) {
    close(out[0]);
    throw_runtime("link emulation: cannot start `" + render(argv) + "`: " + std::strerror(rc));
  }
  char buf[1024];
  for (;;) {
    ssize_t n = read(out[0], buf, sizeof buf);
    if (n > 0) {
      if (output) output->append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(out[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs a set-up command (with an optional batch of lines on stdin); any failure is an error naming
// the command, the batch and what it printed.
void must_run(const std::vector<std::string>& argv, const std::string& batch = {}) {
  std::string output;
  int rc = run_command(argv, batch, &output);
  if (rc != 0) {
    while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
    std::string shown = batch;
    for (auto& c : shown) c = c == '\n' ? ';' : c;
    throw_runtime("link emulation: `" + render(argv) + (batch.empty() ? "" : " <<< '" + shown + "'") +
                  "` failed (exit " + std::to_string(rc) + "): " + (output.empty() ? std::string("no message") : output));
  }
}

// One `ip` process per namespace: a batch runs inside the namespace given with -n (fewer processes
// make set-up several times faster on a loaded machine).
void ip_batch(const std::string& ns, const std::string& lines) {
  if (ns.empty()) must_run({tools().ip, "-batch", "-"}, lines);
  else must_run({tools().ip, "-n", ns, "-batch", "-"}, lines);
}

// ---- registry of live namespaces (read by signal handlers: fixed storage, atomics only) ----------

constexpr int kSlots = 512;
struct Slot {
  std::atomic<int> state{0};  // 0 free, 1 being written, 2 live
  pid_t owner = 0;
  char name[48] = {};
};
Slot g_slots[kSlots];

// Removes a namespace the way `ip netns del` does (detach the bind mount, unlink the file). Plain
// system calls only, so it is safe inside a signal handler. Its veths go when the namespace dies.
void remove_netns_file(const char* name) noexcept {
  char path[128];
  size_t dir_len = std::strlen(kNetnsDir), name_len = std::strlen(name);
  if (dir_len + 1 + name_len + 1 > sizeof path) return;
  std::memcpy(path, kNetnsDir, dir_len);
  path[dir_len] = '/';
  std::memcpy(path + dir_len + 1, name, name_len + 1);
  umount2(path, MNT_DETACH);
  unlink(path);
}

void register_netns(const std::string& name) {
  for (auto& slot : g_slots) {
    int expected = 0;
    if (slot.state.compare_exchange_strong(expected, 1)) {
      slot.owner = getpid();
      std::snprintf(slot.name, sizeof slot.name, "%s", name.c_str());
      slot.state.store(2, std::memory_order_release);
      return;
    }
  }
  throw_runtime("link emulation: more than " + std::to_string(kSlots) + " live namespaces in one process");
}

void unregister_netns(const std::string& name) noexcept {
  for (auto& slot : g_slots) {
    if (slot.state.load(std::memory_order_acquire) == 2 && name == slot.name) {
      slot.state.store(0, std::memory_order_release);
      return;
    }
  }
}

// Async-signal-safe: removes every live namespace created by this very process.
void remove_all_registered() noexcept {
  pid_t self = getpid();
  for (auto& slot : g_slots) {
    if (slot.state.load(std::memory_order_acquire) == 2 && slot.owner == self) remove_netns_file(slot.name);
  }
}

constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL};
struct sigaction g_previous[NSIG];

void on_fatal_signal(int sig) {
  int saved_errno = errno;
  remove_all_registered();
  // Hand the signal on: the previous handler (or the default action) runs once we return.
  sigaction(sig, &g_previous[sig], nullptr);
  raise(sig);
  errno = saved_errno;
}

std::atomic<int> g_next_instance{0};

}  // namespace

// ---- LinkEmulation ---------------------------------------------------------------------------

std::string LinkEmulation::own_prefix() { return "dmn" + std::to_string(getpid()) + "-"; }

LinkEmulation::LinkEmulation(const LinkEmulationConfig& config) : config_(config) {
  if (config.ranks < 1 || config.ranks > kMaxRanks)
    throw_bad_input("link emulation: ranks must be between 1 and " + std::to_string(kMaxRanks) + ", got " +
                    std::to_string(config.ranks));
  if (!std::isfinite(config.gbps) || config.gbps < 0 || (config.gbps > 0 && config.gbps < 0.001))
    throw_bad_input("link emulation: link rate must be 0 (unlimited) or at least 0.001 Gbit/s, got " +
                    std::to_string(config.gbps));
  if (!std::isfinite(config.latency_us) || config.latency_us < 0)
    throw_bad_input("link emulation: latency must be >= 0 us, got " + std::to_string(config.latency_us));
  if (geteuid() != 0)
    throw_runtime("link emulation needs root: network namespaces, veth pairs and tc qdiscs can only be "
                  "created by root (running as uid " + std::to_string(geteuid()) +
                  "); run as root or without an emulated link");
  if (tools().ip.empty() || tools().tc.empty())
    throw_runtime("link emulation needs iproute2: `ip` and `tc` were not found in PATH, /usr/sbin or /sbin "
                  "(install the iproute2 package)");
  remove_stale();
  instance_ = g_next_instance.fetch_add(1);
  try {
    create();
  } catch (...) {
    destroy();
    throw;
  }
}

LinkEmulation::~LinkEmulation() { destroy(); }

void LinkEmulation::create() {
  const std::string base = own_prefix() + std::to_string(instance_);
  const int n = config_.ranks;
  const bool bridged = n > 2;
  for (int r = 0; r < n; ++r) namespaces_.push_back(base + "r" + std::to_string(r));
  if (bridged) namespaces_.push_back(base + "br");
  // Each run has private namespaces, so addresses cannot collide; the pid-derived subnet only makes
  // concurrent runs easy to tell apart when debugging.
  const int subnet = static_cast<int>((static_cast<unsigned>(getpid()) * 16u + static_cast<unsigned>(instance_)) % 256u);
  const std::string net = "10.77." + std::to_string(subnet) + ".";
  for (int r = 0; r < n; ++r) addresses_.push_back(n == 1 ? "127.0.0.1" : net + std::to_string(r + 1));

  std::string adds;
  for (const auto& ns : namespaces_) {
    register_netns(ns);  // before creation: a signal part-way still removes it
    adds += "netns add " + ns + "\n";
  }
  ip_batch("", adds);
  const std::string mtu = " mtu " + std::to_string(kMtu);
  const std::string link = std::string(kLinkName), bridge = std::string(kBridgeName);
  if (bridged) {
    ip_batch(namespaces_.back(), "link set lo up\nlink add name " + bridge + mtu + " type bridge\nlink set " +
                                     bridge + " up\n");
  }
  for (int r = 0; r < n; ++r) {
    std::string lines = "link set lo up\n";
    if (bridged) {
      lines += "link add name " + link + mtu + " type veth peer name p" + std::to_string(r) + mtu + " netns " +
               namespaces_.back() + "\n";
    } else if (n == 2 && r == 0) {
      lines += "link add name " + link + mtu + " type veth peer name " + link + mtu + " netns " + namespaces_[1] + "\n";
    }
    if (n > 1) lines += "addr add " + addresses_[r] + "/24 dev " + link + "\nlink set " + link + " up\n";
    ip_batch(namespaces_[r], lines);
  }
  if (bridged) {
    std::string ports;
    for (int r = 0; r < n; ++r) ports += "link set p" + std::to_string(r) + " master " + bridge + " up\n";
    ip_batch(namespaces_.back(), ports);
  }
  if (n == 1 || config_.gbps <= 0) return;
  // tbf shapes egress only, so every rank's own end gets one. The burst holds one whole GSO packet
  // (TCP hands the veth up to 64 KiB at a time): tbf cuts a packet bigger than its bucket into MTU-sized
  // ones in software, on the sending core, and with a 32 KiB bucket that work doubled the CPU time the
  // collectives took from the ranks at 2 Gbit/s (docs/fidelity.md, "The emulated link's own CPU time").
  // At high rates the bucket is 128 us of traffic; either way the rate holds (a 1.5 MiB AllReduce at
  // 2 Gbit/s: 98 % of the line rate at its p10).
  const double rate_bits = config_.gbps * 1e9;
  const double burst_bytes = std::max(kLargestGsoPacket, rate_bits / 8 * 128e-6);
  char rate[32], burst[32];
  std::snprintf(rate, sizeof rate, "%.0fbit", rate_bits);
  std::snprintf(burst, sizeof burst, "%.0f", burst_bytes);
  for (int r = 0; r < n; ++r)
    must_run({tools().tc, "-n", namespaces_[r], "qdisc", "add", "dev", kLinkName, "root", "tbf", "rate", rate,
              "burst", burst, "latency", "50ms"});
}

void LinkEmulation::destroy() noexcept {
  for (const auto& ns : namespaces_) {
    remove_netns_file(ns.c_str());
    unregister_netns(ns);
  }
  namespaces_.clear();
}

std::string LinkEmulation::namespace_of(int rank) const {
  if (rank < 0 || rank >= config_.ranks)
    throw_bad_input("link emulation: no rank " + std::to_string(rank) + " (ranks: " +
                    std::to_string(config_.ranks) + ")");
  return namespaces_.at(static_cast<size_t>(rank));
}

std::string LinkEmulation::address_of(int rank) const {
  if (rank < 0 || rank >= config_.ranks)
    throw_bad_input("link emulation: no rank " + std::to_string(rank) + " (ranks: " +
                    std::to_string(config_.ranks) + ")");
  return addresses_.at(static_cast<size_t>(rank));
}

std::vector<std::string> LinkEmulation::exec_prefix(int rank) const {
  return {tools().ip, "netns", "exec", namespace_of(rank)};
}

void LinkEmulation::remove_stale() {
  DIR* dir = opendir(kNetnsDir);
  if (!dir) return;  // no namespaces at all
  std::vector<std::string> stale;
  while (dirent* entry = readdir(dir)) {
    const char* name = entry->d_name;
    if (std::strncmp(name, "dmn", 3) != 0) continue;
    char* end = nullptr;
    long pid = std::strtol(name + 3, &end, 10);
    if (end == name + 3 || *end != '-' || pid <= 0) continue;
    if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) stale.emplace_back(name);
  }
  closedir(dir);
  for (const auto& name : stale) remove_netns_file(name.c_str());
}

void LinkEmulation::install_signal_cleanup() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : kCleanupSignals) {
      struct sigaction current {};
      sigaction(sig, nullptr, &current);
      if (current.sa_handler == SIG_IGN) continue;  // e.g. SIGHUP under nohup: stay immune
      g_previous[sig] = current;
      struct sigaction action {};
      action.sa_handler = on_fatal_signal;
      sigemptyset(&action.sa_mask);
      action.sa_flags = SA_RESTART;
      sigaction(sig, &action, nullptr);
    }
    std::atexit([] { remove_all_registered(); });
  });
}

bool LinkEmulation::available(std::string* why) {
  static const std::string reason = [] () -> std::string {
    if (geteuid() != 0) return "link emulation needs root (network namespaces); running as uid " + std::to_string(geteuid());
    const Tools& t = tools();
    if (t.ip.empty() || t.tc.empty()) return "link emulation needs iproute2 (`ip` and `tc` not found)";
    // A throw-away namespace with a veth pair, MTU 9000, tbf, and `ip netns exec` tries every feature.
    const std::string ns = own_prefix() + "probe";
    std::string failure;
    try {
      register_netns(ns);
      must_run({t.ip, "netns", "add", ns});
      must_run({t.ip, "-n", ns, "link", "add", "name", "a", "mtu", "9000", "type", "veth", "peer", "name", "b", "mtu", "9000"});
      must_run({t.tc, "-n", ns, "qdisc", "add", "dev", "a", "root", "tbf", "rate", "1gbit", "burst", "32768",
                "latency", "50ms"});
      must_run({t.ip, "netns", "exec", ns, t.ip, "link", "show", "lo"});
    } catch (const Error& e) {
      failure = e.what();
    }
    remove_netns_file(ns.c_str());
    unregister_netns(ns);
    return failure;
  }();
  if (why) *why = reason;
  return reason.empty();
}

}  // namespace domino
