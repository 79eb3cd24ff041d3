// exec_test_util.hpp: running build/bin/domino-exec from the end-to-end tests: start it with arguments and
// extra environment (and CPUs), capture stdout+stderr in a file, wait with a deadline (a hung job fails the test
// instead of hanging ctest), start ranks in env mode as an outside launcher would, find the rank processes a
// launcher started (by their process name), and hold a run's measured trace against the simulator's schedule.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "executor/runtime/tcp_store.hpp"
#include "sim/ir/schedule.hpp"
#include "sim/model/model_spec.hpp"
#include "sim/trace/timeline.hpp"

namespace domino::exectest {

inline std::string exec_bin() { return std::string(DOMINO_BIN_DIR) + "/domino-exec"; }
inline std::string model_file(const std::string& name) {
  return std::string(DOMINO_TEST_DATA) + "/data/executor/" + name + ".yaml";
}

// A fresh temporary folder, removed with the object.
struct TempDir {
  std::string path;
  TempDir() {
    path = (std::filesystem::temp_directory_path() / "domino-exec-test.XXXXXX").string();
    if (!::mkdtemp(path.data())) path.clear();
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

struct Proc {
  pid_t pid = -1;
  std::string log;
};

// Starts argv (argv[0] a path) with extra environment; with `cpus`, on those CPUs only (its affinity mask);
// with own_group, as the leader of a process group of its own (as a shell starts a job: Ctrl-C reaches the
// whole group).
inline Proc start_program(const std::vector<std::string>& argv, const std::string& log,
                          const std::vector<std::string>& env = {}, const std::vector<int>& cpus = {},
                          bool own_group = false) {
  Proc p;
  p.log = log;
  p.pid = ::fork();
  if (p.pid == 0) {
    if (own_group) ::setpgid(0, 0);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
    if (!cpus.empty()) {
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int c : cpus) CPU_SET(c, &set);
      if (::sched_setaffinity(0, sizeof set, &set) != 0) ::_exit(126);
    }
    std::vector<char*> a;
    for (const std::string& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    ::execv(a[0], a.data());
    ::_exit(127);
  }
  return p;
}

inline Proc start(const std::vector<std::string>& args, const std::string& log,
                  const std::vector<std::string>& env = {}, const std::vector<int>& cpus = {}) {
  std::vector<std::string> argv{exec_bin()};
  argv.insert(argv.end(), args.begin(), args.end());
  return start_program(argv, log, env, cpus);
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Outcome {
  int exit_code = -1;  // -1: killed by a signal or timed out
  int signal = 0;      // the signal that ended it (not after a time-out)
  bool timed_out = false;
  double seconds = 0;
  std::string output;
};

inline Outcome finish(const Proc& p, int timeout_s) {
  Outcome o;
  const auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  for (;;) {
    const pid_t got = ::waitpid(p.pid, &status, WNOHANG);
    if (got == p.pid) break;
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(timeout_s)) {
      ::kill(p.pid, SIGKILL);
      ::waitpid(p.pid, &status, 0);
      o.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!o.timed_out && WIFEXITED(status)) o.exit_code = WEXITSTATUS(status);
  if (!o.timed_out && WIFSIGNALED(status)) o.signal = WTERMSIG(status);
  o.output = read_text(p.log);
  return o;
}

inline Outcome run(const std::vector<std::string>& args, const std::string& log, int timeout_s = 120,
                   const std::vector<std::string>& env = {}) {
  return finish(start(args, log, env), timeout_s);
}

// A port no other test of this machine uses while this process lives: one the kernel finds free, given back
// for rank 0 to serve, and claimed by an exclusive lock on /tmp/domino-test-ports/<port>.lock held until the
// process exits. Without the claim two tests run side by side (ctest -j) were once handed the same port, and
// each one's ranks met the other's store.
inline int free_local_port() {
  static std::vector<int> claims;  // lock descriptors, kept open for the process's life
  const std::filesystem::path dir = "/tmp/domino-test-ports";
  std::error_code ignored;
  std::filesystem::create_directories(dir, ignored);
  for (int attempt = 0; attempt < 64; ++attempt) {
    const int port = domino::TcpStoreServer(0).port();
    const std::string lock = (dir / (std::to_string(port) + ".lock")).string();
    const int fd = ::open(lock.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0666);
    if (fd < 0) return port;  // no lock to take (a read-only /tmp): the port as the kernel gave it
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      claims.push_back(fd);
      return port;
    }
    ::close(fd);
  }
  ADD_FAILURE() << "no local port left unclaimed by the other tests after 64 tries";
  return 0;
}

// The variables that name one rank of `world` to domino-exec in env mode (MASTER_ADDR/PORT come on top).
using RankEnv = std::function<std::vector<std::string>(int rank, int world)>;

// torchrun's names: RANK and WORLD_SIZE.
inline std::vector<std::string> torchrun_rank_env(int rank, int world) {
  return {"RANK=" + std::to_string(rank), "WORLD_SIZE=" + std::to_string(world)};
}

// Starts `world` domino-exec processes in env mode, as an outside launcher would (rank_env's names, by default
// torchrun's, and MASTER_ADDR/PORT on a free local port), and expects each to exit 0; logs go to dir/log<rank>.
inline void run_env_mode_ranks(const std::vector<std::string>& args, const TempDir& dir, int world = 2,
                               const RankEnv& rank_env = torchrun_rank_env) {
  const int port = free_local_port();
  std::vector<Proc> ranks;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> env = rank_env(r, world);
    env.push_back("MASTER_ADDR=127.0.0.1");
    env.push_back("MASTER_PORT=" + std::to_string(port));
    ranks.push_back(start(args, dir / ("log" + std::to_string(r)), env));
  }
  for (const Proc& p : ranks) {
    const Outcome o = finish(p, 120);
    EXPECT_EQ(o.exit_code, 0) << o.output;
  }
}

inline std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  for (pid_t c; in >> c;) out.push_back(c);
  return out;
}

// The value of `key` in a process's environment ("" when absent or unreadable).
inline std::string env_of(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ");
  std::string entry;
  while (std::getline(in, entry, '\0'))
    if (entry.rfind(key + "=", 0) == 0) return entry.substr(key.size() + 1);
  return "";
}

// The rank of a process the launcher forked ("rankN.<program>" as its name, see rank_launcher.hpp); -1 when
// it is not one.
inline int rank_of(pid_t pid) {
  const std::string comm = read_text("/proc/" + std::to_string(pid) + "/comm");
  if (comm.rfind("rank", 0) != 0) return -1;
  const size_t dot = comm.find('.');
  try {
    return std::stoi(comm.substr(4, dot == std::string::npos ? std::string::npos : dot - 4));
  } catch (const std::exception&) {
    return -1;
  }
}

inline bool alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  // A zombie is dead: only its parent has not reaped it yet.
  const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

// A tiny test model (tests/data/executor/<name>.yaml) at TP degree tp.
inline ModelSpec tiny(const std::string& name, int tp) {
  ModelOverrides o;
  o.tp = tp;
  return load_model(model_file(name), o);
}

inline std::set<std::string> schedule_ids(const Schedule& s) {
  std::set<std::string> ids;
  for (const Op& op : s.ops) ids.insert(op_id(op));
  return ids;
}

// Every rank's spans in the measured trace are exactly the schedule's ops, once each, at times not before
// the trace's start.
inline void expect_trace_of(const std::string& path, const Schedule& s, int ranks) {
  const TraceFile trace = read_trace(path);
  EXPECT_EQ(trace.source, "measured") << path;
  std::vector<std::multiset<std::string>> per_rank(static_cast<size_t>(ranks));
  for (const TraceEvent& e : trace.events) {
    ASSERT_GE(e.rank, 0);
    ASSERT_LT(e.rank, ranks);
    EXPECT_GE(e.start_us, 0) << e.id;
    EXPECT_GE(e.dur_us, 0) << e.id;
    per_rank[size_t(e.rank)].insert(e.id);
  }
  const std::set<std::string> expected = schedule_ids(s);
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(per_rank[size_t(r)].size(), s.ops.size()) << path << " rank " << r << ": one span per op";
    EXPECT_EQ(std::set<std::string>(per_rank[size_t(r)].begin(), per_rank[size_t(r)].end()), expected)
        << path << " rank " << r;
  }
}

inline nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(read_text(path)); }

}  // namespace domino::exectest
