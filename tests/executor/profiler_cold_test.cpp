// profiler_cold_test.cpp: memory-bound probes are timed out of cache: the last-level cache size is read from
// a sysfs cache folder (the largest level of data or unified cache, instruction caches left out), and every
// memory-bound probe of a workload rotates over buffer sets that together exceed the size read.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "executor/profiler/cold_cache.hpp"
#include "executor/profiler/profile_workload.hpp"

namespace domino::prof {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text << "\n";
}

// A sysfs-like cache folder: L1d 48K, L1i 64K (bigger, but instructions), L2 2M, L3 24M.
fs::path fake_cache_dir() {
  const fs::path dir = fs::temp_directory_path() / ("domino-cache-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const auto index = [&](int i, const char* level, const char* type, const char* size) {
    write(dir / ("index" + std::to_string(i)) / "level", level);
    write(dir / ("index" + std::to_string(i)) / "type", type);
    write(dir / ("index" + std::to_string(i)) / "size", size);
  };
  index(0, "1", "Data", "48K");
  index(1, "1", "Instruction", "64K");
  index(2, "2", "Unified", "2048K");
  index(3, "3", "Unified", "24M");
  write(dir / "uevent", "");
  return dir;
}

TEST(ColdCache, ReadsTheLastLevelFromSysfs) {
  const fs::path dir = fake_cache_dir();
  EXPECT_EQ(last_level_cache_bytes(dir.string()), int64_t(24) << 20);
  fs::remove_all(dir / "index3");
  EXPECT_EQ(last_level_cache_bytes(dir.string()), int64_t(2048) << 10);
  fs::remove_all(dir);
  EXPECT_EQ(last_level_cache_bytes(dir.string()), 0);  // unreadable: unknown
  EXPECT_GT(probe_cache_bytes(), 0);                    // then an assumed size
}

TEST(ColdCache, ReadsACoresL2FromSysfs) {
  const fs::path dir = fake_cache_dir();
  EXPECT_EQ(core_cache_bytes(2, dir.string()), int64_t(2048) << 10);
  EXPECT_EQ(core_cache_bytes(1, dir.string()), int64_t(48) << 10);  // the data cache, not the instructions'
  EXPECT_EQ(core_cache_bytes(4, dir.string()), 0);
  fs::remove_all(dir);
}

TEST(ColdCache, BufferSetsTogetherExceedTheCache) {
  const int64_t cache = int64_t(32) << 20;
  for (int64_t bytes : {int64_t(4096), int64_t(6144), int64_t(100'000), int64_t(1) << 20, int64_t(24) << 20}) {
    const int sets = cold_buffer_sets(bytes, cache);
    EXPECT_GE(double(sets) * double(bytes), 2.0 * double(cache)) << bytes;
    EXPECT_LE(sets, kMaxColdSets);
  }
  EXPECT_EQ(cold_buffer_sets(int64_t(1) << 30, cache), 1);  // bigger than the cache alone
}

TEST(ColdCache, EveryMemoryBoundProbeOfAWorkloadRotatesBeyondTheCacheRead) {
  WorkloadOptions wo;
  wo.quick = true;
  const Workload w = plan_workload(wo);
  ASSERT_FALSE(w.memory_ops.empty());
  const int64_t cache = probe_cache_bytes();
  // ... or as far as a chain can: a few-KiB probe against a last-level cache of 100 MiB and more (a server
  // socket's, shared by a VM) needs more sets than a chain tells apart; it rotates over that many.
  for (const Probe& p : w.memory_ops) {
    const int64_t bytes = mini_bytes(*p.mini);
    const int sets = cold_buffer_sets(bytes, cache);
    EXPECT_TRUE(double(sets) * double(bytes) > double(cache) || sets == kMaxColdSets)
        << p.label << ": " << sets << " sets of " << bytes << " B against a cache of " << cache << " B";
  }
}

}  // namespace
}  // namespace domino::prof
