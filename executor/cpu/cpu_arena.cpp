// cpu_arena.cpp: CPU buffer blocks on transparent huge pages, what the kernel granted, and the profiler's
// spare block.
#include "executor/cpu/cpu_arena.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>

namespace domino {
namespace {

constexpr int64_t kHugePageBytes = int64_t(2) << 20;  // x86-64 and arm64 (4 KiB base pages)

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

}  // namespace

float* allocate_arena(int64_t bytes, int64_t* block_bytes) {
  if (bytes < kHugePageBytes) {
    *block_bytes = (bytes + 63) / 64 * 64;
    return static_cast<float*>(std::aligned_alloc(64, size_t(*block_bytes)));
  }
  *block_bytes = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* p = std::aligned_alloc(size_t(kHugePageBytes), size_t(*block_bytes));
  // Only advice: a kernel without transparent huge pages (or with them off) leaves the block on base pages.
  if (p) madvise(p, size_t(*block_bytes), MADV_HUGEPAGE);
  return static_cast<float*>(p);
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
  std::free(std::exchange(s.block, nullptr));
  return allocate_arena(need, got);
}

void keep_spare_arena(float* block, int64_t bytes) {
  SpareArena& s = spare();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.block && s.bytes >= bytes) return std::free(block);
  std::free(s.block);
  s.block = block, s.bytes = bytes;
}

}  // namespace domino
