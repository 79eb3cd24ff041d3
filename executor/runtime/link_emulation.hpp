// link_emulation.hpp: an emulated slow interconnect for the CPU backend (--link-gbps): one network
// namespace per rank, joined by a veth pair (2 ranks) or a bridge in its own namespace (more ranks),
// MTU 9000 everywhere and a tc tbf rate limit on every rank's egress. Removed on every exit path.
#pragma once

#include <string>
#include <vector>

namespace domino {

struct LinkEmulationConfig {
  int ranks = 2;
  double gbps = 0;        // egress rate of every rank in Gbit/s; 0 = no rate limit (namespaces only)
  double latency_us = 0;  // NOT applied by the link (the kernel has no netem): kept for the runtime to add
};

class LinkEmulation {
 public:
  // Creates everything or nothing: a failure part-way removes what was made, then throws
  // domino::Error (Runtime) with the failing command and its stderr; BadInput for a bad config.
  explicit LinkEmulation(const LinkEmulationConfig& config);
  ~LinkEmulation();
  LinkEmulation(const LinkEmulation&) = delete;
  LinkEmulation& operator=(const LinkEmulation&) = delete;

  // Run rank r's process with: ip netns exec <namespace_of(r)> <cmd...>
  std::string namespace_of(int rank) const;
  // The same as argv words with `ip`'s absolute path: {"/usr/sbin/ip", "netns", "exec", <namespace>}.
  std::vector<std::string> exec_prefix(int rank) const;
  // IPv4 address (no prefix length) to bind Gloo's TCP device to.
  std::string address_of(int rank) const;
  // Every namespace this emulation created (rank namespaces, then the bridge's if any).
  const std::vector<std::string>& namespaces() const { return namespaces_; }
  const LinkEmulationConfig& config() const { return config_; }

  // Removes namespaces left by dead runs: names start with "dmn<pid>-" and that pid no longer exists.
  static void remove_stale();
  // SIGINT/SIGTERM/SIGHUP and fatal signals (SEGV, ABRT, BUS, FPE, ILL): remove this process's live
  // namespaces, then re-raise (the previous handler, or the default action). Also cleans at exit().
  // Only the process that created a namespace removes it (forked children inherit nothing to clean).
  static void install_signal_cleanup();
  // Whether emulation can work here (root, `ip` and `tc` present, netns/veth/tbf usable); if not,
  // *why says what is missing. The probe runs once per process.
  static bool available(std::string* why);
  // Prefix of every namespace name this process creates ("dmn<pid>-").
  static std::string own_prefix();

 private:
  void create();
  void destroy() noexcept;

  LinkEmulationConfig config_;
  int instance_ = 0;
  std::vector<std::string> namespaces_;
  std::vector<std::string> addresses_;
};

}  // namespace domino
