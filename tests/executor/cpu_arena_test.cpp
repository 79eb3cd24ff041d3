// cpu_arena_test.cpp: the CPU buffer blocks: alignment, whole huge pages, what the kernel reports granted.
#include "executor/cpu/cpu_arena.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace domino {
namespace {

constexpr int64_t kHuge = int64_t(2) << 20;

// True when this kernel gives a region advised with MADV_HUGEPAGE huge pages ("always" or "madvise").
bool transparent_huge_pages_on() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string setting;
  std::getline(in, setting);
  return setting.find("[always]") != std::string::npos || setting.find("[madvise]") != std::string::npos;
}

TEST(CpuArena, ALargeBlockSpansWholeHugePagesFromAHugePageBoundary) {
  int64_t block = 0;
  float* p = allocate_arena(3 * kHuge + 100, &block);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(block, 4 * kHuge);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % uintptr_t(kHuge), 0u);
  std::free(p);
}

TEST(CpuArena, ASmallBlockIsCacheLineAlignedAndNotRoundedToAHugePage) {
  int64_t block = 0;
  float* p = allocate_arena(1000, &block);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(block, 1024);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  std::free(p);
}

TEST(CpuArena, ATouchedLargeBlockIsReportedOnHugePagesWhenTheKernelGrantsThem) {
  int64_t block = 0;
  float* p = allocate_arena(4 * kHuge, &block);
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, size_t(block));
  const int64_t huge = resident_huge_page_bytes(p, block);
  std::free(p);
  ASSERT_GE(huge, 0) << "/proc/self/smaps could not be read";
  EXPECT_LE(huge, block);
  if (!transparent_huge_pages_on()) GTEST_SKIP() << "transparent huge pages are off on this kernel";
  EXPECT_GT(huge, 0) << "no huge page for 8 MiB advised with MADV_HUGEPAGE before its first touch";
}

TEST(CpuArena, MemoryNoMappingHoldsIsReportedUnknown) {
  EXPECT_EQ(resident_huge_page_bytes(reinterpret_cast<const void*>(uintptr_t(4096)), 4096), -1);
}

TEST(CpuArena, TheSpareBlockIsHandedBackWhenLargeEnoughAndReplacedWhenNot) {
  int64_t got = 0;
  float* first = take_spare_arena(kHuge, &got);
  ASSERT_NE(first, nullptr);
  keep_spare_arena(first, got);
  int64_t again = 0;
  EXPECT_EQ(take_spare_arena(kHuge / 2, &again), first);
  EXPECT_EQ(again, got);
  keep_spare_arena(first, again);
  int64_t larger = 0;
  float* bigger = take_spare_arena(2 * got, &larger);
  ASSERT_NE(bigger, nullptr);
  EXPECT_GE(larger, 2 * got);
  std::free(bigger);
}

}  // namespace
}  // namespace domino
