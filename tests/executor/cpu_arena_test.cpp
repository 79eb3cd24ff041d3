// cpu_arena_test.cpp: the CPU buffer blocks: alignment, whole huge pages, what the kernel reports granted.
#include "executor/cpu/cpu_arena.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "sim/base/error.hpp"

namespace domino {
namespace {

constexpr int64_t kHuge = int64_t(2) << 20;

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
  const std::string mode = transparent_huge_page_mode();
  if (mode != "always" && mode != "madvise") GTEST_SKIP() << "transparent huge pages are off on this kernel";
  EXPECT_GT(huge, 0) << "no huge page for 8 MiB advised with MADV_HUGEPAGE before its first touch";
}

TEST(CpuArena, MemoryNoMappingHoldsIsReportedUnknown) {
  EXPECT_EQ(resident_huge_page_bytes(reinterpret_cast<const void*>(uintptr_t(4096)), 4096), -1);
}

TEST(CpuArena, BlocksAfterAReservationComeOneAfterAnotherFromThePoolUntilItIsFull) {
  reserve_arena_pool(5 * kHuge);
  int64_t a_bytes = 0, b_bytes = 0, small_bytes = 0, c_bytes = 0;
  float* a = allocate_arena(2 * kHuge - 8, &a_bytes);
  float* b = allocate_arena(kHuge + 1, &b_bytes);
  float* small = allocate_arena(4096, &small_bytes);  // under a huge page: never from the pool
  float* c = allocate_arena(2 * kHuge, &c_bytes);     // one huge page left: a block of its own
  ASSERT_TRUE(a && b && small && c);
  EXPECT_EQ(a_bytes, 2 * kHuge);
  EXPECT_EQ(reinterpret_cast<char*>(b), reinterpret_cast<char*>(a) + a_bytes);
  EXPECT_EQ(b_bytes, 2 * kHuge);
  EXPECT_NE(reinterpret_cast<char*>(small), reinterpret_cast<char*>(b) + b_bytes);
  EXPECT_NE(reinterpret_cast<char*>(c), reinterpret_cast<char*>(b) + b_bytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c) % uintptr_t(kHuge), 0u);
  EXPECT_THROW(reserve_arena_pool(kHuge), Error) << "a second pool while the first one's blocks live";
  for (float* block : {a, b, small, c}) release_arena(block);
  EXPECT_NO_THROW(reserve_arena_pool(kHuge));  // the last block gave the pool back
  int64_t d_bytes = 0;
  float* d = allocate_arena(kHuge, &d_bytes);
  ASSERT_NE(d, nullptr);
  d[0] = 1.0f;
  release_arena(d);
}

TEST(CpuArena, ThePoolsBlocksAreZeroedAndWritable) {
  reserve_arena_pool(3 * kHuge);
  int64_t bytes = 0;
  float* p = allocate_arena(3 * kHuge, &bytes);
  ASSERT_NE(p, nullptr);
  const int64_t floats = bytes / int64_t(sizeof(float));
  int64_t nonzero = 0;
  for (int64_t i = 0; i < floats; i += 1024) nonzero += p[i] != 0.0f;
  EXPECT_EQ(nonzero, 0);
  p[floats - 1] = 2.0f;
  EXPECT_EQ(p[floats - 1], 2.0f);
  release_arena(p);
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
