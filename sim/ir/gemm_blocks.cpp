// gemm_blocks.cpp: the row blocks of a GEMM op and the shape of one (gemm_blocks.hpp).
#include "sim/ir/gemm_blocks.hpp"

#include <array>

#include "sim/base/error.hpp"

namespace domino {

namespace {

// A GEMM's operands whose rows are its rows: in[0] and out[0], or in[0] and in[1] for a weight gradient.
std::array<int, 2> row_operands(const Op& op) {
  return op.code == OpCode::MatMulWgrad ? std::array<int, 2>{0, 1} : std::array<int, 2>{0, -1};
}

Region& operand(Op& op, int i) { return i >= 0 ? op.in[size_t(i)] : op.out[0]; }
const Region& operand(const Op& op, int i) { return i >= 0 ? op.in[size_t(i)] : op.out[0]; }

// A region's rows are evenly spaced when they cover the buffer's whole sequence or a single batch entry.
bool rows_evenly_spaced(const Schedule& s, const Region& r) {
  return r.b1 - r.b0 <= 1 || (r.s0 == 0 && r.s1 == s.buffers.at(size_t(r.buffer)).seq);
}

}  // namespace

int32_t gemm_row_blocks(const Schedule& s, const Op& op) {
  if (op.kind != OpKind::Gemm) return 1;
  for (int i : row_operands(op)) {
    const Region& r = operand(op, i);
    if (r.valid() && !rows_evenly_spaced(s, r)) return int32_t(r.b1 - r.b0);
  }
  return 1;
}

Op gemm_block(const Op& op) {
  const int64_t blocks = op.attrs.row_blocks;
  if (op.kind != OpKind::Gemm || blocks <= 1) return op;
  const bool wgrad = op.code == OpCode::MatMulWgrad;
  const int64_t rows = wgrad ? op.k : op.m;
  Op block = op;
  bool cut = rows % blocks == 0;
  for (int i : row_operands(op)) {
    Region& r = operand(block, i);
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
  (wgrad ? block.k : block.m) = rows / blocks;
  block.flops = op.flops / double(blocks);
  block.bytes = op.bytes / double(blocks);
  block.attrs.row_blocks = 1;
  return block;
}

}  // namespace domino
