// gemm_blocks.cpp: the row blocks of a GEMM op and the shape of one (gemm_blocks.hpp).
#include "sim/ir/gemm_blocks.hpp"

#include <array>

#include "sim/base/error.hpp"

namespace domino {

namespace {

// A GEMM's operands whose rows are its rows: its input and output, or both inputs of a weight gradient.
template <typename OpT>
auto row_regions(OpT& op) {
  return std::array{&op.in[0], op.code == OpCode::MatMulWgrad ? &op.in[1] : &op.out[0]};
}

// A region's rows are evenly spaced when they cover the buffer's whole sequence or a single batch entry.
bool rows_evenly_spaced(const Schedule& s, const Region& r) {
  return r.b1 - r.b0 <= 1 || (r.s0 == 0 && r.s1 == s.buffers.at(size_t(r.buffer)).seq);
}

}  // namespace

int32_t gemm_row_blocks(const Schedule& s, const Op& op) {
  if (op.kind != OpKind::Gemm) return 1;
  for (const Region* r : row_regions(op))
    if (r->valid() && !rows_evenly_spaced(s, *r)) return int32_t(r->b1 - r->b0);
  return 1;
}

Op gemm_block(const Op& op) {
  const int64_t blocks = op.attrs.row_blocks;
  if (op.kind != OpKind::Gemm || blocks <= 1) return op;
  const int64_t rows = gemm_block_rows(op);
  Op block = op;
  bool cut = rows % blocks == 0;
  for (Region* region : row_regions(block)) {
    Region& r = *region;
    if (!r.valid()) continue;
    // The first block's rows: its first batch entries, or a single entry's first sequence rows.
    if ((r.b1 - r.b0) % blocks == 0)
      r.b1 = r.b0 + (r.b1 - r.b0) / blocks;
    else if (r.b1 - r.b0 == 1 && (r.s1 - r.s0) % blocks == 0)
      r.s1 = r.s0 + (r.s1 - r.s0) / blocks;
    else
      cut = false;
  }
  if (!cut)
    throw_runtime("op " + op_id(op) + ": its " + std::to_string(rows) + " rows do not split into " +
                  std::to_string(blocks) + " blocks");
  gemm_block_rows(block) = rows / blocks;
  block.flops = op.flops / double(blocks);
  block.bytes = op.bytes / double(blocks);
  block.attrs.row_blocks = 1;
  return block;
}

}  // namespace domino
