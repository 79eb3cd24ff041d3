// cpu_arena.cpp: CPU buffer blocks on transparent huge pages, the shuffled pool of an interleaved launch,
// what the kernel granted, and the profiler's spare block.
#include "executor/cpu/cpu_arena.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "sim/base/error.hpp"

namespace domino {
namespace {

// Parses a /proc/self/smaps header line "start-end perms ...": false when the line is not one.
bool mapping_range(const std::string& line, uintptr_t* start, uintptr_t* end) {
  std::istringstream in(line);
  std::string range;
  in >> range;
  const size_t dash = range.find('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 == range.size()) return false;
  for (char c : range)
    if (c != '-' && !std::isxdigit(static_cast<unsigned char>(c))) return false;
  *start = std::stoull(range.substr(0, dash), nullptr, 16);
  *end = std::stoull(range.substr(dash + 1), nullptr, 16);
  return true;
}

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
    uintptr_t start = 0, end = 0;
    if (line.rfind("AnonHugePages:", 0) == 0) {
      if (inside) total += std::stoll(line.substr(14)) * 1024;
    } else if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
               mapping_range(line, &start, &end)) {
      inside = start < hi && lo < end;
      seen = seen || inside;
    }
  }
  return seen ? std::min(total, bytes) : -1;
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
