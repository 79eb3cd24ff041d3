// op_cost_key.hpp: the fields of an op that the cost model reads (op_us, gemm_us_on_sms, op_tiles,
// collective costs), as a hash key. Two ops of one schedule with equal keys cost the same under one cost
// model and rank count, so Interference works each distinct SM-bound op out once (a schedule's layers
// repeat the same GEMMs).
#pragma once

#include <bit>
#include <cstdint>
#include <initializer_list>

#include "sim/ir/schedule.hpp"

namespace domino {

struct OpCostKey {
  OpKind kind;
  OpCode code;
  DType dtype;
  int64_t m, n, k;
  uint64_t flops_bits, bytes_bits;  // compared by bits: equal keys must give bit-identical costs
  int64_t q_rows;                   // attention's query rows (-1 without a valid first input)
  int64_t heads;

  explicit OpCostKey(const Op& op)
      : kind(op.kind),
        code(op.code),
        dtype(op.dtype),
        m(op.m),
        n(op.n),
        k(op.k),
        flops_bits(std::bit_cast<uint64_t>(op.flops)),
        bytes_bits(std::bit_cast<uint64_t>(op.bytes)),
        q_rows(op.n_in > 0 && op.in[0].valid() ? op.in[0].rows() : -1),
        heads(op.attrs.heads) {}
  bool operator==(const OpCostKey&) const = default;
};

struct OpCostKeyHash {
  size_t operator()(const OpCostKey& key) const {
    uint64_t h = uint64_t(key.m);
    for (uint64_t v : {uint64_t(key.n), uint64_t(key.k), key.bytes_bits, key.flops_bits, uint64_t(key.code)})
      h = (h ^ v) * 0x9e3779b97f4a7c15ULL;
    return size_t(h ^ (h >> 29));
  }
};

}  // namespace domino
