// cold_cache.cpp: the last-level and per-core cache sizes from sysfs, and the buffer sets that exceed the
// last level (cold_cache.hpp).
#include "executor/profiler/cold_cache.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

namespace domino::prof {

namespace {

std::string first_word(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string word;
  in >> word;
  return word;
}

// "32768K", "1M", "512" (bytes) -> bytes; 0 when unreadable.
int64_t size_bytes(const std::string& text) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return 0;
  size_t used = 0;
  const int64_t value = std::stoll(text, &used);
  const std::string unit = text.substr(used);
  if (unit.empty()) return value;
  if (unit == "K") return value << 10;
  if (unit == "M") return value << 20;
  if (unit == "G") return value << 30;
  return 0;
}

// The largest data cache of `level`, or of the highest level when `level` is 0; 0 when none can be read.
int64_t data_cache_bytes(const std::string& cache_dir, int level) {
  namespace fs = std::filesystem;
  std::error_code ec;
  int best_level = 0;
  int64_t best = 0;
  for (const auto& entry : fs::directory_iterator(cache_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("index", 0) != 0) continue;
    if (first_word(entry.path() / "type") == "Instruction") continue;
    const std::string level_text = first_word(entry.path() / "level");
    const int found = level_text.empty() ? 0 : std::atoi(level_text.c_str());
    if (level > 0 && found != level) continue;
    const int64_t bytes = size_bytes(first_word(entry.path() / "size"));
    if (bytes > 0 && (found > best_level || (found == best_level && bytes > best)))
      best_level = found, best = bytes;
  }
  return best;
}

}  // namespace

int64_t last_level_cache_bytes(const std::string& cache_dir) { return data_cache_bytes(cache_dir, 0); }

// A VM's sysfs may hold no cache folders (a 2-vCPU AMD EPYC VM's does not); the C library reads the CPU's.
int64_t core_cache_bytes(int level, const std::string& cache_dir) {
  const int64_t from_sysfs = data_cache_bytes(cache_dir, level);
  if (from_sysfs > 0 || level != 2) return from_sysfs;
  const long from_cpu = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return from_cpu > 0 ? int64_t(from_cpu) : 0;
}

int64_t probe_cache_bytes() {
  static const int64_t bytes = [] {
    const int64_t llc = last_level_cache_bytes();
    return llc > 0 ? llc : int64_t(64) << 20;
  }();
  return bytes;
}

// Capped: a probe of a few KiB against a last-level cache of 100 MiB or more (a server socket's, of which a
// VM shares a part) rotates over kMaxColdSets sets, most of the cache rather than twice it.
int cold_buffer_sets(int64_t probe_bytes, int64_t cache_bytes) {
  const double sets = std::ceil(2.0 * double(cache_bytes) / double(std::max<int64_t>(probe_bytes, 1)));
  return int(std::clamp(sets, 1.0, double(kMaxColdSets)));
}

}  // namespace domino::prof
