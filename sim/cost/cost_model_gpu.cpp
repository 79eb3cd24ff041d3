// cost_model_gpu.cpp: the CostModel pieces a profile's gpu section adds. GEMMs are timed from their CTA
// tiles: ceil(m / tile_m) x ceil(n / tile_n) tiles run in waves of one tile per SM, a wave lasting one
// tile's k loop at the SM's share of the peak plus a fixed per-tile cost, so that efficiency falls for
// small k (the fixed cost), for shapes that leave a partial last wave, and for edge tiles that compute
// padding. The same tiles tell the simulator how much longer an op runs on the SMs a collective leaves.
#include <algorithm>
#include <cmath>

#include "sim/cost/cost_model.hpp"
#include "sim/ir/gemm_blocks.hpp"

namespace domino {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t waves(int64_t tiles, int sms_available) { return ceil_div(tiles, std::max(sms_available, 1)); }

bool transposed(const Op& op) { return op.code == OpCode::MatMulDgrad || op.code == OpCode::MatMulWgrad; }

int64_t gemm_tiles(const Op& op, const std::array<int, 2>& tile) {
  return ceil_div(op.m, tile[0]) * ceil_div(op.n, tile[1]);
}

}  // namespace

int64_t CostModel::op_tiles(const Op& op) const {
  if (!profile_.gpu) return 0;
  const GpuProfile& g = *profile_.gpu;
  if (op.kind == OpKind::Gemm && op.attrs.row_blocks > 1) {
    // A strided batch runs every block's tiles in one launch; a weight gradient one product at a time.
    const int64_t per_block = op_tiles(gemm_block(op));
    return op.code == OpCode::MatMulWgrad ? per_block : per_block * op.attrs.row_blocks;
  }
  if (op.kind == OpKind::Gemm && op.m > 0 && op.n > 0) return gemm_tiles(op, *gemm_tile(op).tile);
  // Attention (FlashAttention's grid): one CTA per block of attention_tile_m query rows of each head and
  // sequence (blocks do not span batch entries); an op without its query region counts its rows as one.
  if (op.kind == OpKind::Attention && op.m > 0) {
    const Region& q = op.in[0];
    const int64_t blocks = op.n_in > 0 && q.valid() && q.rows() == op.m
                               ? (q.b1 - q.b0) * ceil_div(q.s1 - q.s0, g.attention_tile_m)
                               : ceil_div(op.m, g.attention_tile_m);
    return blocks * std::max<int64_t>(op.attrs.heads, 1);
  }
  return 0;
}

// launch + max(waves x tile time, bytes / memory bandwidth). A transposed operand (dgrad: B^T, wgrad: A^T)
// runs its k loop at transpose_efficiency of the forward rate.
double CostModel::tile_model_us(const Op& op, int sms_available, const std::array<int, 2>& tile) const {
  const GpuProfile& g = *profile_.gpu;
  const DTypeCosts& c = costs(op.dtype);
  const double sm_flops_per_us = c.peak_flops_per_us / g.sms;
  const double k_rate = sm_flops_per_us * g.mainloop_efficiency * (transposed(op) ? g.transpose_efficiency : 1.0);
  const double tile_us = g.tile_fixed_us + 2.0 * tile[0] * tile[1] * double(op.k) / k_rate;
  const double compute = double(waves(gemm_tiles(op, tile), sms_available)) * tile_us;
  return launch_us_ + std::max(compute, op.bytes / mem_bytes_per_us_);
}

// The library picks the kernel by shape alone, not knowing that a collective may hold SMs when it runs: the
// tile fastest on every SM, the first listed on ties; with its time there.
CostModel::TileChoice CostModel::gemm_tile(const Op& op) const {
  const int all = profile_.gpu->sms;
  TileChoice best{&gpu_.tiles.front(), tile_model_us(op, all, gpu_.tiles.front())};
  for (size_t i = 1; i < gpu_.tiles.size(); ++i) {
    const double us = tile_model_us(op, all, gpu_.tiles[i]);
    if (us < best.us_on_all_sms) best = {&gpu_.tiles[i], us};
  }
  return best;
}

double CostModel::gemm_us_on_sms(const Op& op, int sms_available) const {
  if (!profile_.gpu || (op.kind != OpKind::Gemm && op.kind != OpKind::Attention)) {
    return op_us(op, 1, profile_.devices_per_node);
  }
  const int all = profile_.gpu->sms;
  // Whatever gives the time alone on every SM (a measured table row, attention's curve), the wave count
  // scales the work that runs on the SMs; the launch does not.
  const auto rescaled = [&](double alone_us) {
    if (sms_available == all) return alone_us;
    const int64_t tiles = op_tiles(op);
    if (tiles == 0) return alone_us;
    const double scale = double(waves(tiles, sms_available)) / double(waves(tiles, all));
    return launch_us_ + (alone_us - launch_us_) * scale;
  };
  if (op.kind == OpKind::Attention) return rescaled(attention_us(op.dtype, op.flops, op.bytes));
  if (op.attrs.row_blocks > 1) return blocked_gemm_us_on_sms(op, sms_available);
  const DTypeCosts& c = costs(op.dtype);
  if (op.m <= 0 || op.n <= 0 || op.k <= 0) return gemm_us(op.dtype, op.m, op.n, op.k, op.flops, op.bytes, gemm_transpose(op.code));
  if (!c.table.empty()) {
    const double flops = op.flops > 0 ? op.flops : 2.0 * double(op.m) * double(op.n) * double(op.k);
    const double measured = table_us(c, op.m, op.n, op.k, gemm_transpose(op.code), flops);
    if (measured >= 0) return rescaled(measured);
  }
  const TileChoice choice = gemm_tile(op);
  return sms_available == all ? choice.us_on_all_sms : tile_model_us(op, sms_available, *choice.tile);
}

// A GEMM of several row blocks as the CUDA backend runs it (gemm_blocks.hpp): a weight gradient one product
// per block, accumulating into one output; a forward or input-gradient product one strided batch, whose
// blocks' tiles share the waves: the block's time alone on every SM, rescaled by the waves of all tiles.
double CostModel::blocked_gemm_us_on_sms(const Op& op, int sms_available) const {
  const Op block = gemm_block(op);
  const double blocks = double(op.attrs.row_blocks);
  if (op.code == OpCode::MatMulWgrad) return blocks * gemm_us_on_sms(block, sms_available);
  const double alone = gemm_us_on_sms(block, profile_.gpu->sms);
  const int64_t tiles = op_tiles(block);
  if (tiles == 0) return blocks * alone;
  const double scale =
      double(waves(tiles * op.attrs.row_blocks, sms_available)) / double(waves(tiles, profile_.gpu->sms));
  return launch_us_ + (alone - launch_us_) * scale;
}

int CostModel::collective_sms(const Op& op, int tp, int devices_per_node) const {
  const int own = collective(op, tp, devices_per_node).sms;
  if (own > 0 || !domino::collective(op.kind)) return own;
  return profile_.gpu ? profile_.gpu->collective_sms : 0;
}

double CostModel::collective_hbm_bytes(const Op& op, int tp) const {
  if (!profile_.gpu) return 0;
  return profile_.gpu->collective_hbm_bytes_per_bus_byte * ring_traffic(op.kind, op.bytes, tp);
}

}  // namespace domino
