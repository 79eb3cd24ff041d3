// partial_buffer_table_test.cpp: the builder's table of partial-sum buffers (sim/ir/partial_buffer_table.hpp):
// every stored key found again through growth, absent keys and key fields that do not fit refused.
#include "sim/ir/partial_buffer_table.hpp"

#include <gtest/gtest.h>

#include <set>

#include "sim/base/error.hpp"

namespace domino::detail {
namespace {

TEST(PartialBufferTable, EveryFieldOfTheKeyTellsKeysApart) {
  const uint64_t base = PartialBufferTable::key(1, 1, 3, 1, 4, 2, 3, 1, false);
  const std::set<uint64_t> keys = {
      base,
      PartialBufferTable::key(0, 1, 3, 1, 4, 2, 3, 1, false), PartialBufferTable::key(1, 0, 3, 1, 4, 2, 3, 1, false),
      PartialBufferTable::key(1, 1, 2, 1, 4, 2, 3, 1, false), PartialBufferTable::key(1, 1, 3, 0, 4, 2, 3, 1, false),
      PartialBufferTable::key(1, 1, 3, 1, 8, 2, 3, 1, false), PartialBufferTable::key(1, 1, 3, 1, 4, 4, 3, 1, false),
      PartialBufferTable::key(1, 1, 3, 1, 4, 2, 2, 1, false), PartialBufferTable::key(1, 1, 3, 1, 4, 2, 3, 0, false),
      PartialBufferTable::key(1, 1, 3, 1, 4, 2, 3, -1, false), PartialBufferTable::key(1, 1, 3, 1, 4, 2, 3, 1, true)};
  EXPECT_EQ(keys.size(), 11u);
}

TEST(PartialBufferTable, FindsWhatWasStoredThroughGrowth) {
  PartialBufferTable table;
  EXPECT_EQ(table.find(PartialBufferTable::key(0, 0, 0, 0, 1, 1, 0, 0, false)), -1);
  // More keys than the first 64 slots hold at half load: the table grows twice.
  int32_t next = 0;
  for (int layer = 0; layer < 20; ++layer)
    for (int slice = 0; slice < 8; ++slice) table.insert(PartialBufferTable::key(2, 1, layer, 1, 8, 1, slice, 0, false), next++);
  next = 0;
  for (int layer = 0; layer < 20; ++layer)
    for (int slice = 0; slice < 8; ++slice)
      EXPECT_EQ(table.find(PartialBufferTable::key(2, 1, layer, 1, 8, 1, slice, 0, false)), next++);
  EXPECT_EQ(table.find(PartialBufferTable::key(2, 1, 20, 1, 8, 1, 0, 0, false)), -1);
  EXPECT_EQ(table.find(PartialBufferTable::key(1, 1, 0, 1, 8, 1, 0, 0, false)), -1);
}

TEST(PartialBufferTable, RefusesFieldsThatDoNotFit) {
  EXPECT_THROW(PartialBufferTable::key(0, 0, 1 << 16, 0, 1, 1, 0, 0, false), Error);
  EXPECT_THROW(PartialBufferTable::key(0, 0, 0, 0, 256, 1, 0, 0, false), Error);
  EXPECT_THROW(PartialBufferTable::key(16, 0, 0, 0, 1, 1, 0, 0, false), Error);
  EXPECT_THROW(PartialBufferTable::key(0, 0, 0, 0, 1, 1, 0, -2, false), Error);
}

}  // namespace
}  // namespace domino::detail
