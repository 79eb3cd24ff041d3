// cuda_free_memory.cpp: free memory of the devices a host's ranks will use, read before the ranks start.
// The launcher forks its ranks after this and must not hold a CUDA context then (a forked child cannot use
// it), so the devices are asked from a short-lived child process, whose answer comes back through a pipe.
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "executor/cuda/cuda_backend.hpp"
#include "executor/runtime/check.hpp"

namespace domino {
namespace {

// In the child: "COUNT\n" then "DEVICE FREE_BYTES\n" per device asked for.
std::string query_devices(const std::set<int>& local_ranks) {
  std::ostringstream out;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) return "0\n";
  out << count << "\n";
  std::set<int> devices;
  for (int r : local_ranks) devices.insert(cuda_device_of(r, count));
  for (int d : devices) {
    size_t free_bytes = 0, total_bytes = 0;
    DOMINO_CUDA_CHECK(cudaSetDevice(d));
    DOMINO_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    out << d << " " << free_bytes << "\n";
  }
  return out.str();
}

// Runs query_devices in a child; "" when the child failed.
std::string query_in_child(const std::set<int>& local_ranks) {
  int fds[2];
  if (::pipe(fds) != 0) return "";
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return "";
  }
  if (pid == 0) {
    ::close(fds[0]);
    int rc = 1;
    try {
      const std::string text = query_devices(local_ranks);
      rc = ::write(fds[1], text.data(), text.size()) == ssize_t(text.size()) ? 0 : 1;
    } catch (...) {
    }
    ::_exit(rc);  // no destructors, no atexit: the parent's state is not the child's to tear down
  }
  ::close(fds[1]);
  std::string text;
  char buf[256];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) text.append(buf, size_t(n));
    else if (n == 0 || errno != EINTR) break;
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? text : "";
}

}  // namespace

std::vector<MemoryPool> cuda_memory_pools(const HostRanks& ranks) {
  std::set<int> asked;
  if (ranks.self >= 0) asked.insert(ranks.self);
  else asked.insert(ranks.local_ranks.begin(), ranks.local_ranks.end());
  std::istringstream in(query_in_child(asked));
  int count = 0;
  if (!(in >> count) || count < 1) return {};  // no device: prepare() says so with the reason
  std::map<int, MemoryPool> pools;
  for (int d; in >> d;) {
    MemoryPool& pool = pools[d];
    in >> pool.available_bytes;
    pool.name = "CUDA device " + std::to_string(d);
    pool.measure = "free (cudaMemGetInfo)";
  }
  for (int r : ranks.local_ranks) {
    auto it = pools.find(cuda_device_of(r, count));
    if (it != pools.end()) it->second.local_ranks.push_back(r);
  }
  std::vector<MemoryPool> out;
  for (auto& [d, pool] : pools) out.push_back(std::move(pool));
  return out;
}

}  // namespace domino
