// op_cost_key.hpp: the fields of an op that the cost model reads (op_us, gemm_us_on_sms, op_tiles,
// collective_sms, collective_hbm_bytes), as a hash key. Two ops with equal keys cost the same under one cost
// model and rank count, so Interference works each distinct SM-bound op of a schedule out once (a schedule's
// layers repeat the same GEMMs) and OpCostCache each distinct op of many schedules (the tuner's probes).
// What reads what (sim/cost/cost_model*.cpp): every kind its kind and bytes; memory-bound ops their code, m,
// their fresh bytes (and those bytes' source), on a row block's first column chunk the chunk count, and
// whether the op is a later chunk;
// GEMMs dtype, m, n, k, flops, code (a transposed operand's rate) and row blocks; attention dtype, flops,
// bytes, m, heads and its query region's batch and sequence extents (FlashAttention's grid of query blocks
// per batch entry). A field the cost model starts to read belongs here, with a case in
// tests/sim/op_cost_cache_test.cpp.
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
  uint64_t fresh_bits, fresh_from_bits;  // Op::fresh_bytes, fresh_from_bytes
  int64_t q_batch, q_seq;           // the first input's batch and sequence extents (-1 without a valid one)
  int64_t heads;
  int64_t row_blocks;
  int16_t first_chunk_of;  // on a row block's first column chunk, the chunk count (chunk_rows); else 0
  bool later_chunk;  // a row block's column chunk after its first (MemoryCost::later_chunk_bandwidth_gbps)

  explicit OpCostKey(const Op& op)
      : kind(op.kind),
        code(op.code),
        dtype(op.dtype),
        m(op.m),
        n(op.n),
        k(op.k),
        flops_bits(std::bit_cast<uint64_t>(op.flops)),
        bytes_bits(std::bit_cast<uint64_t>(op.bytes)),
        fresh_bits(std::bit_cast<uint64_t>(op.fresh_bytes)),
        fresh_from_bits(std::bit_cast<uint64_t>(op.fresh_from_bytes)),
        q_batch(op.n_in > 0 && op.in[0].valid() ? op.in[0].b1 - op.in[0].b0 : -1),
        q_seq(op.n_in > 0 && op.in[0].valid() ? op.in[0].s1 - op.in[0].s0 : -1),
        heads(op.attrs.heads),
        row_blocks(op.attrs.row_blocks),
        first_chunk_of(op.chunk == 0 ? op.attrs.chunks : int16_t(0)),
        later_chunk(op.chunk > 0) {}
  bool operator==(const OpCostKey&) const = default;
};

struct OpCostKeyHash {
  size_t operator()(const OpCostKey& key) const {
    uint64_t h = uint64_t(key.m);
    for (uint64_t v : {uint64_t(key.n), uint64_t(key.k), key.bytes_bits, key.flops_bits, uint64_t(key.code),
                       uint64_t(key.q_seq)})
      h = (h ^ v) * 0x9e3779b97f4a7c15ULL;
    return size_t(h ^ (h >> 29));
  }
};

}  // namespace domino
