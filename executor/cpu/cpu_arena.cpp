// cpu_arena.cpp: CPU buffer blocks on transparent huge pages, the shuffled pool of an interleaved launch,
// what the kernel granted, and the profiler's spare block.
#include "executor/cpu/cpu_arena.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "sim/base/error.hpp"

namespace domino {
namespace {

// A pool's blocks are bump-allocated and never reused one by one: an interleaved launch prepares its plans
// once.
struct ArenaPool {
  std::mutex mutex;
  char* base = nullptr;
  int64_t size = 0, used = 0;
  int live = 0;  // blocks handed out and not yet released
};
ArenaPool& pool() {
  static ArenaPool p;
  return p;
}

// Huge-page units in an order drawn from a fixed xorshift stream (the same every run).
std::vector<int64_t> shuffled_units(int64_t units) {
  std::vector<int64_t> order(static_cast<size_t>(units));
  for (int64_t i = 0; i < units; ++i) order[size_t(i)] = i;
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int64_t i = units - 1; i > 0; --i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::swap(order[size_t(i)], order[size_t(x % uint64_t(i + 1))]);
  }
  return order;
}

float* advised_block(int64_t block_bytes) {
  void* p = std::aligned_alloc(size_t(kHugePageBytes), size_t(block_bytes));
  // Only advice: a kernel without transparent huge pages (or with them off) leaves the block on base pages.
  if (p) madvise(p, size_t(block_bytes), MADV_HUGEPAGE);
  return static_cast<float*>(p);
}

}  // namespace

int64_t arena_block_bytes(int64_t bytes) {
  if (bytes < kHugePageBytes) return (bytes + 63) / 64 * 64;
  return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

float* allocate_arena(int64_t bytes, int64_t* block_bytes) {
  *block_bytes = arena_block_bytes(bytes);
  if (bytes < kHugePageBytes) return static_cast<float*>(std::aligned_alloc(64, size_t(*block_bytes)));
  ArenaPool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (p.base && p.used + *block_bytes <= p.size) {
    char* block = p.base + p.used;
    p.used += *block_bytes;
    ++p.live;
    return reinterpret_cast<float*>(block);
  }
  return advised_block(*block_bytes);
}

void release_arena(float* block) {
  ArenaPool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  const char* c = reinterpret_cast<const char*>(block);
  if (!p.base || c < p.base || c >= p.base + p.size) return std::free(block);
  if (--p.live > 0) return;
  std::free(std::exchange(p.base, nullptr));
  p.size = p.used = 0;
}

void reserve_arena_pool(int64_t bytes) {
  ArenaPool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (p.live > 0) throw_runtime("an arena pool is still in use: one pool per process at a time");
  std::free(std::exchange(p.base, nullptr));
  p.size = p.used = 0;
  if (bytes <= 0) return;
  const int64_t size = arena_block_bytes(std::max(bytes, kHugePageBytes));
  char* base = reinterpret_cast<char*>(advised_block(size));
  if (!base) throw_runtime("cannot set aside " + std::to_string(size) + " bytes for the plans' buffers");
  for (int64_t unit : shuffled_units(size / kHugePageBytes))
    std::memset(base + unit * kHugePageBytes, 0, size_t(kHugePageBytes));
  p.base = base, p.size = size;
}

int64_t resident_huge_page_bytes(const void* p, int64_t bytes) {
  std::ifstream smaps("/proc/self/smaps");
  if (!smaps) return -1;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p), hi = lo + uintptr_t(bytes);
  bool inside = false, seen = false;
  int64_t total = 0;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long start = 0, end = 0;  // a mapping's header line: "start-end perms offset ..." in hex
    long long kib = 0;
    if (std::sscanf(line.c_str(), "AnonHugePages: %lld kB", &kib) == 1) {
      if (inside) total += kib * 1024;
    } else if (std::sscanf(line.c_str(), "%lx-%lx ", &start, &end) == 2) {
      inside = start < hi && lo < end;
      seen = seen || inside;
    }
  }
  return seen ? std::min(total, bytes) : -1;
}

std::string transparent_huge_page_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(in, line);
  const size_t open = line.find('['), close = line.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return "unavailable";
  return line.substr(open + 1, close - open - 1);
}

namespace {
struct SpareArena {
  std::mutex mutex;
  float* block = nullptr;
  int64_t bytes = 0;
};
SpareArena& spare() {
  static SpareArena s;
  return s;
}
}  // namespace

float* take_spare_arena(int64_t need, int64_t* got) {
  SpareArena& s = spare();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.block && s.bytes >= need) {
    *got = s.bytes;
    return std::exchange(s.block, nullptr);
  }
  if (s.block) release_arena(std::exchange(s.block, nullptr));
  return allocate_arena(need, got);
}

void keep_spare_arena(float* block, int64_t bytes) {
  SpareArena& s = spare();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.block && s.bytes >= bytes) return release_arena(block);
  if (s.block) release_arena(s.block);
  s.block = block, s.bytes = bytes;
}

}  // namespace domino
