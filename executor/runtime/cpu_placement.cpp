// cpu_placement.cpp: the names, the affinity mask and the per-rank choice of cores (see cpu_placement.hpp).
#include "executor/runtime/cpu_placement.hpp"

#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sim/base/error.hpp"

namespace domino {

std::string placement_name(CpuPlacement p) {
  switch (p) {
    case CpuPlacement::Rank:
      return "rank";
    case CpuPlacement::Compute:
      return "compute";
    case CpuPlacement::None:
      break;
  }
  return "none";
}

std::string wait_name(WorkerWait w) { return w == WorkerWait::Spin ? "spin" : "block"; }

CpuPlacement parse_placement(const std::string& name) {
  for (CpuPlacement p : {CpuPlacement::None, CpuPlacement::Rank, CpuPlacement::Compute})
    if (name == placement_name(p)) return p;
  throw_bad_input("unknown CPU placement '" + name + "' (none, rank or compute)");
}

WorkerWait parse_wait(const std::string& name) {
  for (WorkerWait w : {WorkerWait::Block, WorkerWait::Spin})
    if (name == wait_name(w)) return w;
  throw_bad_input("unknown worker wait '" + name + "' (block or spin)");
}

std::vector<int> affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

bool bound_by_launcher(const std::vector<int>& cpus) {
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 && long(cpus.size()) < online;
}

RankCores place_rank(const PlacementRequest& request, const std::vector<int>& cpus, int index, int ranks) {
  RankCores cores;
  if (request.placement == CpuPlacement::None || cpus.empty()) return cores;
  if (index < 0 || ranks < 1 || index >= ranks)
    throw_bad_input("rank " + std::to_string(index) + " is outside a host of " + std::to_string(ranks) +
                    " ranks");
  const size_t n = cpus.size();
  if (size_t(ranks) > n) {
    if (request.required)
      throw_bad_input(
          "--cpu-placement " + placement_name(request.placement) +
          " needs a core per rank: " + std::to_string(ranks) + " ranks, " + std::to_string(n) +
          " CPU(s) in this process's affinity mask (--cpu-placement none leaves the threads unpinned)");
    if (!request.share) return cores;
  }
  const int cpu = cpus[size_t(index) % n];
  cores.compute_cpu = cpu;
  if (request.placement == CpuPlacement::Rank) cores.process_cpu = cpu;
  return cores;
}

void enter_realtime() {
  sched_param param{};
  param.sched_priority = kRealtimeCommPriority;
  if (::sched_setscheduler(0, SCHED_FIFO, &param) != 0)
    throw_bad_input(
        std::string("--realtime: cannot schedule a thread SCHED_FIFO (needs root or CAP_SYS_NICE): ") +
        std::strerror(errno));
}

void leave_realtime() {
  if (::sched_getscheduler(0) != SCHED_FIFO) return;
  sched_param param{};
  param.sched_priority = 0;
  if (::sched_setscheduler(0, SCHED_OTHER, &param) != 0)
    throw_runtime(std::string("cannot put a thread back under SCHED_OTHER: ") + std::strerror(errno));
}

void pin_calling_thread(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (::sched_setaffinity(0, sizeof set, &set) != 0)
    throw_runtime("cannot pin a thread to CPU " + std::to_string(cpu) + ": " + std::strerror(errno));
}

}  // namespace domino
