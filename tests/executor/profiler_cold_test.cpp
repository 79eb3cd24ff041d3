// profiler_cold_test.cpp: probes are timed out of cache: the last-level and a core's cache sizes are read
// from a sysfs cache folder (data or unified caches, instruction caches left out), every memory-bound probe
// of a workload rotates over buffer sets that together exceed the last level, and a GEMM probe, where the
// backend asks so (the CPU), over sets that exceed a core's cache.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "executor/profiler/cold_cache.hpp"
#include "executor/profiler/probe_schedule.hpp"
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

TEST(ColdCache, ReadsACoresCacheAsTheLevelBelowTheLast) {
  const fs::path dir = fake_cache_dir();
  EXPECT_EQ(core_cache_bytes(dir.string()), int64_t(2048) << 10);
  fs::remove_all(dir / "index3");
  EXPECT_EQ(core_cache_bytes(dir.string()), int64_t(48) << 10);  // L2 last: L1d is a core's
  fs::remove_all(dir / "index2");
  EXPECT_EQ(core_cache_bytes(dir.string()), 0);  // one level: none below the last
  fs::remove_all(dir);
  EXPECT_EQ(core_cache_bytes(dir.string()), 0);
  EXPECT_GT(probe_core_cache_bytes(), 0);
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

// A CPU GEMM probe gets a buffer set per copy, enough to exceed a core's cache twice over; a backend that
// does not ask so chains min_chain copies on one set, and memory-bound probes are cold either way.
TEST(ColdCache, GemmProbesRotateBeyondACoresCacheWhereTheBackendAsks) {
  WorkloadOptions wo;
  wo.quick = true;
  wo.models = {default_model()};
  const Workload w = plan_workload(wo);
  ASSERT_FALSE(w.gemms.empty());
  const int64_t core = probe_core_cache_bytes();
  const ProfilingTraits cold{.min_chain = 1, .gemm_operands_core_cold = true};
  const ProfilingTraits queued{.min_chain = 8, .gemm_operands_core_cold = false};
  int rotating = 0;
  for (const Probe& p : w.gemms) {
    const int64_t bytes = mini_bytes(*p.mini);
    const Schedule chain = compute_probe_chain(*p.mini, cold);
    const size_t copies = chain.ops.size();
    EXPECT_EQ(chain.buffers.size(), copies * p.mini->buffers.size()) << p.label;
    EXPECT_GE(double(copies) * double(bytes), 2.0 * double(core)) << p.label << ": " << copies << " sets";
    EXPECT_LT(double(copies - 1) * double(bytes), 2.0 * double(core)) << p.label << ": more sets than needed";
    rotating += copies > 1;
    const Schedule same = compute_probe_chain(*p.mini, queued);
    EXPECT_EQ(same.ops.size(), 8u);
    EXPECT_EQ(same.buffers.size(), p.mini->buffers.size()) << p.label;
  }
  EXPECT_GT(rotating, 0);  // cpu-gpt's GEMMs are smaller than twice any core cache of 1 MiB or more
  for (const Probe& p : w.memory_ops) {
    const Schedule chain = compute_probe_chain(*p.mini, queued);
    EXPECT_EQ(chain.ops.size(),
              size_t(std::max(8, cold_buffer_sets(mini_bytes(*p.mini), probe_cache_bytes()))));
  }
}

}  // namespace
}  // namespace domino::prof
