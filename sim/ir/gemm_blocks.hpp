// gemm_blocks.hpp: GEMMs whose rows are not evenly spaced. A row slice along the sequence of several batch
// entries leaves each entry's rows a block of its own, and every backend runs such a GEMM as one product per
// block: the CPU backend one Eigen product per run of rows, the CUDA backend a strided batch for a forward or
// input-gradient product and one product per block, accumulated, for a weight gradient. The builder records
// the count in OpAttrs::row_blocks; the cost model times the block's shape, and the profiler measures it.
#pragma once

#include <cstdint>

#include "sim/ir/schedule.hpp"

namespace domino {

// The products a GEMM op of schedule `s` runs as (OpAttrs::row_blocks): the batch entries of a row operand
// (the input and output of a forward or input-gradient product, both inputs of a weight gradient) that
// slices the sequence of several entries; 1 when every row operand is evenly spaced.
int32_t gemm_row_blocks(const Schedule& s, const Op& op);

// The rows a GEMM's blocks split: m, or k for a weight gradient (whose both inputs are row operands).
inline int64_t& gemm_block_rows(Op& op) { return op.code == OpCode::MatMulWgrad ? op.k : op.m; }
inline int64_t gemm_block_rows(const Op& op) { return op.code == OpCode::MatMulWgrad ? op.k : op.m; }

// The GEMM one block runs: its row operands cut to their first batch entry, m (forward, input gradient) or
// k (weight gradient) divided by the block count, flops and bytes in proportion, row_blocks 1. The op itself
// when it is one product. Throws Runtime when its rows do not divide into its blocks.
Op gemm_block(const Op& op);

}  // namespace domino
