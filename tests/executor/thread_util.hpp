// thread_util.hpp: the threads of the calling process that run at idle priority (SCHED_IDLE), with their
// affinity masks, read from /proc/self/task: what the CPU-poller tests hold a poller (or its absence) to.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace domino::exectest {

struct IdleThread {
  pid_t tid = 0;
  std::vector<int> cpus;  // its affinity mask
};

// Scheduling policy of one task from /proc/self/task/TID/stat (field 41), -1 if it has gone meanwhile.
inline int task_policy(const std::string& tid) {
  std::ifstream in("/proc/self/task/" + tid + "/stat");
  std::string line;
  if (!std::getline(in, line)) return -1;
  std::istringstream after_name(line.substr(line.rfind(')') + 2));  // fields from the 3rd (state) on
  std::string field;
  for (int i = 3; i <= 41; ++i)
    if (!(after_name >> field)) return -1;
  return std::stoi(field);
}

inline std::vector<IdleThread> idle_priority_threads() {
  std::vector<IdleThread> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    const std::string tid = entry.path().filename().string();
    if (task_policy(tid) != SCHED_IDLE) continue;
    IdleThread t;
    t.tid = pid_t(std::stoi(tid));
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(t.tid, sizeof set, &set) == 0)
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) t.cpus.push_back(c);
    out.push_back(t);
  }
  return out;
}

}  // namespace domino::exectest
