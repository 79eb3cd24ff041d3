// partial_buffer_table.hpp: the builder's partial-sum buffers by key, an open-addressing hash table in one
// array. The builder looks one up per partial sum of every slice; the tuner runs thousands of builds, and a
// node-based map keyed on nine ints hashed them all and allocated (and freed) a node per buffer of each.
#pragma once

#include <bit>
#include <cstdint>
#include <utility>
#include <vector>

#include "sim/base/error.hpp"

namespace domino::detail {

class PartialBufferTable {
 public:
  // (kind, block, parity or layer, split dim, p, q, slice, chunk, sharded) packed into one word: the layer in
  // 16 bits, p, q, slice and chunk + 1 in 8 each, the others in 4 (a validated plan's fields fit: layers
  // <= 2^14, p and pipeline chunks <= 8, q <= 4).
  static uint64_t key(int kind, int block, int layer, int dim, int p, int q, int slice, int chunk, bool sharded) {
    const uint32_t nibbles = uint32_t(kind) | uint32_t(block) | uint32_t(dim);
    const uint32_t bytes = uint32_t(p) | uint32_t(q) | uint32_t(slice) | uint32_t(chunk + 1);
    if (nibbles > 0xf || bytes > 0xff || uint32_t(layer) > 0xffff)
      throw_runtime("partial-sum buffer key out of range");
    return uint64_t(kind) | uint64_t(block) << 4 | uint64_t(dim) << 8 | uint64_t(sharded) << 12 |
           uint64_t(layer) << 16 | uint64_t(p) << 32 | uint64_t(q) << 40 | uint64_t(slice) << 48 |
           uint64_t(chunk + 1) << 56;
  }

  // The buffer stored under `key`, or -1.
  int32_t find(uint64_t key) const {
    if (slots_.empty()) return -1;
    for (size_t i = home(key);; i = (i + 1) & mask()) {
      const Slot& s = slots_[i];
      if (s.buffer < 0) return -1;
      if (s.key == key) return s.buffer;
    }
  }

  // Stores `buffer` (>= 0) under `key`, which must not be stored yet.
  void insert(uint64_t key, int32_t buffer) {
    if (2 * (used_ + 1) > slots_.size()) grow();
    place(key, buffer);
    ++used_;
  }

 private:
  struct Slot {
    uint64_t key = 0;
    int32_t buffer = -1;  // -1: empty
  };

  // Fibonacci hashing: the product's top bits depend on every bit of the key (its low bits on the key's low
  // bits only), so the slot is taken from the top.
  size_t home(uint64_t key) const { return size_t((key * 0x9e3779b97f4a7c15ULL) >> shift_); }
  size_t mask() const { return slots_.size() - 1; }

  void place(uint64_t key, int32_t buffer) {
    size_t i = home(key);
    while (slots_[i].buffer >= 0) i = (i + 1) & mask();
    slots_[i] = Slot{key, buffer};
  }

  // Doubles the table (64 slots at first: a two-layer probe holds a few tens of keys), keeping it at most
  // half full so that probe runs stay short.
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : 2 * old.size(), Slot{});
    shift_ = 64 - std::countr_zero(slots_.size());
    for (const Slot& s : old)
      if (s.buffer >= 0) place(s.key, s.buffer);
  }

  std::vector<Slot> slots_;  // a power of two in size
  int shift_ = 64;           // 64 - log2(slots_.size())
  size_t used_ = 0;
};

}  // namespace domino::detail
