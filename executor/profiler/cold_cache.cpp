// cold_cache.cpp: the last-level cache size from sysfs and the buffer sets that exceed it (cold_cache.hpp).
#include "executor/profiler/cold_cache.hpp"

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

}  // namespace

int64_t last_level_cache_bytes(const std::string& cache_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  int best_level = 0;
  int64_t best = 0;
  for (const auto& entry : fs::directory_iterator(cache_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("index", 0) != 0) continue;
    if (first_word(entry.path() / "type") == "Instruction") continue;
    const std::string level_text = first_word(entry.path() / "level");
    const int level = level_text.empty() ? 0 : std::atoi(level_text.c_str());
    const int64_t bytes = size_bytes(first_word(entry.path() / "size"));
    if (bytes > 0 && (level > best_level || (level == best_level && bytes > best)))
      best_level = level, best = bytes;
  }
  return best;
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
