// cost_model.cpp: op durations from a profile. GEMMs: a measured table (exact shape and transpose pair, else
// the throughput of the nearest measured shapes of the pair in log space) or the roofline
// max(flops / (peak x efficiency(size)), bytes / memory bandwidth), once per row block (gemm_blocks.hpp);
// memory-bound ops: bytes / bandwidth (the
// opcode's, else the kind's, else the general figures); collectives (AllReduce, AllGather,
// ReduceScatter): arrival skew + the latency and bandwidth of the fastest eligible algorithm (ring, NVLS) of
// the kind's curves, or the pinned one.
#include "sim/cost/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "sim/base/error.hpp"
#include "sim/ir/gemm_blocks.hpp"

namespace domino {

namespace {

constexpr double kFlopsPerUsPerTflops = 1e6;   // 1 TFLOP/s = 1e6 FLOP per microsecond
constexpr double kBytesPerUsPerGbps = 1e3;     // 1 GB/s = 1e3 bytes per microsecond
// Table neighbours farther than this in log(m, n, k) space (a factor 4 along one axis) say nothing
// reliable about a shape: the roofline is used instead.
const double kTableRadius = std::log(4.0);
constexpr int kNeighbours = 4;

// Orders table rows (sorted by gemm_row_less: shape first) against a shape.
struct ShapeOrder {
  using Shape = std::tuple<int64_t, int64_t, int64_t>;
  template <class Row>
  bool operator()(const Row& r, const Shape& s) const { return std::make_tuple(r.m, r.n, r.k) < s; }
  template <class Row>
  bool operator()(const Shape& s, const Row& r) const { return s < std::make_tuple(r.m, r.n, r.k); }
};

}  // namespace

void CostModel::fill_collective(CollectiveCosts& c, const CollectiveProfile& p, const char* level) {
  c.present = true;
  c.level = level;
  c.pinned = p.pinned ? static_cast<int>(*p.pinned) : -1;
  c.sync_us = p.sync_us;
  c.sync_per_compute = p.sync_per_compute;
  const auto fill = [&](KindCosts& kind, CollectiveAlgorithm which, const CollectiveCurve& curve) {
    kind.present = true;
    AlgorithmCosts& a = kind.algorithms[static_cast<int>(which)];
    a.present = true;
    a.latency_us = p.sync_us + curve.latency_us;
    a.bytes_per_us = curve.bus_bandwidth_gbps * kBytesPerUsPerGbps;
    for (const auto& r : curve.table) {
      a.bus_bytes_per_us.log_x.push_back(std::log(r.bytes));
      a.bus_bytes_per_us.y.push_back(r.bus_bandwidth_gbps * kBytesPerUsPerGbps);
    }
    a.sms = curve.sms;
    a.min_ranks = curve.min_ranks;
  };
  const auto fill_kind = [&](OpKind kind, const AlgorithmCurves& curves) {
    KindCosts& k = c.kinds[collective_index(kind)];
    fill(k, CollectiveAlgorithm::Ring, curves.ring);
    if (curves.nvls) fill(k, CollectiveAlgorithm::Nvls, *curves.nvls);
  };
  fill_kind(OpKind::AllReduce, {p.ring(), p.nvls});
  if (p.allgather) fill_kind(OpKind::AllGather, *p.allgather);
  if (p.reduce_scatter) fill_kind(OpKind::ReduceScatter, *p.reduce_scatter);
}

int CostModel::collective_index(OpKind kind) {
  switch (kind) {
    case OpKind::AllReduce: return 0;
    case OpKind::AllGather: return 1;
    case OpKind::ReduceScatter: return 2;
    default: return -1;
  }
}

double CostModel::LogCurve::at(double x) const {
  const size_t n = log_x.size();
  if (n == 1) return y[0];
  const double lx = std::log(x);
  if (!(lx > log_x[0])) return y[0];  // also catches x <= 0 (log is -inf or nan)
  if (lx >= log_x[n - 1]) return y[n - 1];
  size_t i = 1;
  while (log_x[i] < lx) ++i;
  const double t = (lx - log_x[i - 1]) / (log_x[i] - log_x[i - 1]);
  return y[i - 1] + t * (y[i] - y[i - 1]);
}

CostModel::KindMemory CostModel::kind_memory_of(const MemoryCost& c) {
  return KindMemory{c.bandwidth_gbps * kBytesPerUsPerGbps, c.launch_overhead_us, c.chunk_row_us,
                    c.cached_bandwidth_gbps * kBytesPerUsPerGbps,
                    c.later_chunk_bandwidth_gbps * kBytesPerUsPerGbps};
}

CostModel::CostModel(Profile profile) : profile_(std::move(profile)) {
  validate_profile(profile_);
  for (int d = 0; d < kNumDTypes; ++d) {
    const auto& g = profile_.gemm[d];
    if (!g) continue;
    DTypeCosts& c = dtype_[d];
    c.present = true;
    c.peak_flops_per_us = g->peak_tflops * kFlopsPerUsPerTflops;
    for (const auto& p : g->efficiency) {
      c.efficiency.log_x.push_back(std::log(p.gflop * 1e9));  // curve indexed by FLOPs
      c.efficiency.y.push_back(p.efficiency);
    }
    for (const auto& r : g->table) {
      const double flops = 2.0 * double(r.m) * double(r.n) * double(r.k);
      c.table.push_back({std::log(double(r.m)), std::log(double(r.n)), std::log(double(r.k)),
                         flops / r.time_us, r.m, r.n, r.k, r.time_us, r.transpose, r.blocks});
    }
  }
  for (const auto& p : profile_.attention.efficiency) {
    attention_curve_.log_x.push_back(std::log(p.gflop * 1e9));
    attention_curve_.y.push_back(p.efficiency);
  }
  for (const auto& [name, a] : profile_.attention.per_code) {
    const size_t i = name == to_string(OpCode::AttnFwd) ? 0 : 1;  // validated: AttnFwd or AttnBwd
    attention_code_[i] =
        AttentionCode{a.launch_overhead_us, a.gflops > 0 ? 1 / (a.gflops * 1e3) : 0,
                      a.bandwidth_gbps > 0 ? 1 / (a.bandwidth_gbps * kBytesPerUsPerGbps) : 0};
  }
  mem_bytes_per_us_ = profile_.memory.bandwidth_gbps * kBytesPerUsPerGbps;
  launch_us_ = profile_.memory.launch_overhead_us;
  cache_bytes_ = profile_.memory.cache_bytes;
  for (int k = 0; k < kNumOpKinds; ++k) {
    const auto own = profile_.memory.per_kind.find(to_string(static_cast<OpKind>(k)));
    kind_memory_[k] = own == profile_.memory.per_kind.end() ? KindMemory{mem_bytes_per_us_, launch_us_}
                                                            : kind_memory_of(own->second);
  }
  for (size_t c = 0; c < code_memory_.size(); ++c) {
    const auto own = profile_.memory.per_code.find(to_string(OpCode(c)));
    if (own != profile_.memory.per_code.end()) code_memory_[c] = kind_memory_of(own->second);
  }
  fill_collective(intra_, profile_.intra_node, "intra_node");
  if (profile_.inter_node) fill_collective(inter_, *profile_.inter_node, "inter_node");
  if (const auto& g = profile_.gpu) {
    gpu_.tiles.push_back({g->tile_m, g->tile_n});
    gpu_.tiles.insert(gpu_.tiles.end(), g->other_tiles.begin(), g->other_tiles.end());
    gpu_.hbm_bytes_per_us = g->hbm_bandwidth_gbps * kBytesPerUsPerGbps;
  }
}

const CostModel::DTypeCosts& CostModel::costs(DType dtype) const {
  const DTypeCosts& c = dtype_[static_cast<int>(dtype)];
  if (!c.present) {
    throw_bad_input("profile '" + profile_.name + "' (" + profile_.path + ") has no gemm figures for " +
                    profile_dtype_key(dtype) + ": add gemm." + profile_dtype_key(dtype) + " or pick another profile");
  }
  return c;
}

double CostModel::roofline_us(double flops, double peak_flops_per_us, double efficiency, double bytes) const {
  const double compute = flops / (peak_flops_per_us * efficiency);
  const double memory = bytes / mem_bytes_per_us_;
  return launch_us_ + std::max(compute, memory);
}

double CostModel::gemm_efficiency(DType dtype, double flops) const { return costs(dtype).efficiency.at(flops); }

// The exact row of a shape, its transpose pair and its block count; of one block, else the shape's 4-column
// row. -1 when the table has none.
double CostModel::exact_row_us(const DTypeCosts& c, int64_t m, int64_t n, int64_t k, GemmTranspose t,
                               int64_t blocks) {
  const auto same_shape = std::equal_range(c.table.begin(), c.table.end(), std::make_tuple(m, n, k), ShapeOrder{});
  double any_pair = -1;
  for (auto it = same_shape.first; it != same_shape.second; ++it) {
    if (it->blocks != blocks) continue;
    if (it->transpose == t) return it->time_us;
    if (!it->transpose) any_pair = it->time_us;
  }
  return any_pair;
}

// Exact shape: exact_row_us of one block. Otherwise the inverse-square-distance
// weighted throughput of up to kNeighbours rows of the same pair (or 4-column rows) within kTableRadius,
// applied to this GEMM's flops. -1 when no row is close enough. Rows of several blocks time whole ops, not
// one product: only blocked_gemm_us reads them.
double CostModel::table_us(const DTypeCosts& c, int64_t m, int64_t n, int64_t k, GemmTranspose t,
                           double flops) const {
  if (const double exact = exact_row_us(c, m, n, k, t, 1); exact >= 0) return exact;
  if (m <= 0 || n <= 0 || k <= 0) return -1;
  const double lm = std::log(double(m)), ln = std::log(double(n)), lk = std::log(double(k));
  double best_d2[kNeighbours];
  double best_tp[kNeighbours];
  int found = 0;
  const double r2 = kTableRadius * kTableRadius;
  for (const TableRow& r : c.table) {
    if ((r.transpose && *r.transpose != t) || r.blocks > 1) continue;
    const double dm = r.log_m - lm, dn = r.log_n - ln, dk = r.log_k - lk;
    const double d2 = dm * dm + dn * dn + dk * dk;
    if (d2 > r2) continue;
    // Insertion into the small sorted arrays of the nearest rows seen so far.
    int pos = found < kNeighbours ? found++ : kNeighbours;
    if (pos == kNeighbours) {
      if (d2 >= best_d2[kNeighbours - 1]) continue;
      pos = kNeighbours - 1;
    }
    while (pos > 0 && best_d2[pos - 1] > d2) {
      best_d2[pos] = best_d2[pos - 1];
      best_tp[pos] = best_tp[pos - 1];
      --pos;
    }
    best_d2[pos] = d2;
    best_tp[pos] = r.flops_per_us;
  }
  if (found == 0) return -1;
  double wsum = 0, tsum = 0;
  for (int i = 0; i < found; ++i) {
    const double w = 1.0 / best_d2[i];
    wsum += w;
    tsum += w * best_tp[i];
  }
  return flops / (tsum / wsum);
}

double CostModel::gemm_us(DType dtype, int64_t m, int64_t n, int64_t k, double flops, double bytes,
                          GemmTranspose transpose) const {
  const DTypeCosts& c = costs(dtype);
  if (flops <= 0) flops = 2.0 * double(m) * double(n) * double(k);
  if (!c.table.empty()) {
    const double t = table_us(c, m, n, k, transpose, flops);
    if (t >= 0) return t;
  }
  if (flops <= 0) return launch_us_ + bytes / mem_bytes_per_us_;
  return roofline_us(flops, c.peak_flops_per_us, c.efficiency.at(flops), bytes);
}

// A GEMM of several row blocks: its measured row of as many blocks, else its block's time once per block.
double CostModel::blocked_gemm_us(const Op& op) const {
  const GemmTranspose t = gemm_transpose(op.code);
  if (op.attrs.row_blocks <= 1) return gemm_us(op.dtype, op.m, op.n, op.k, op.flops, op.bytes, t);
  const Op block = gemm_block(op);
  const double whole = exact_row_us(costs(op.dtype), block.m, block.n, block.k, t, op.attrs.row_blocks);
  if (whole >= 0) return whole;
  return double(op.attrs.row_blocks) *
         gemm_us(block.dtype, block.m, block.n, block.k, block.flops, block.bytes, t);
}

double CostModel::attention_us(DType dtype, double flops, double bytes) const {
  const DTypeCosts& c = costs(dtype);
  if (flops <= 0) return launch_us_ + bytes / mem_bytes_per_us_;
  const double eff = attention_curve_.y.empty() ? profile_.attention.relative_efficiency * c.efficiency.at(flops)
                                                : attention_curve_.at(flops);
  return roofline_us(flops, c.peak_flops_per_us, eff, bytes);
}

static_assert(int(OpCode::AttnBwd) == int(OpCode::AttnFwd) + 1, "attention_code_ is indexed from AttnFwd");

double CostModel::attention_us(const Op& op) const {
  const int i = int(op.code) - int(OpCode::AttnFwd);
  if (i >= 0 && i < int(attention_code_.size()) && attention_code_[size_t(i)]) {
    const AttentionCode& a = *attention_code_[size_t(i)];
    return a.launch_us + op.flops * a.us_per_flop + op.bytes * a.us_per_byte;
  }
  return attention_us(op.dtype, op.flops, op.bytes);
}

double CostModel::memory_us(double bytes) const { return launch_us_ + bytes / mem_bytes_per_us_; }

double CostModel::memory_us(OpKind kind, double bytes) const {
  const KindMemory& m = kind_memory_[static_cast<int>(kind)];
  return m.launch_us + bytes / m.bytes_per_us;
}

double CostModel::memory_us(const Op& op) const {
  const std::optional<KindMemory>& own = code_memory_[static_cast<size_t>(op.code)];
  const KindMemory& m = own ? *own : kind_memory_[static_cast<int>(op.kind)];
  // Rows a collective has just copied out on this core come from its cache, where they fit (Op::fresh_bytes).
  const double cached = op.fresh_bytes > 0 && m.cached_bytes_per_us > 0 && op.fresh_from_bytes <= cache_bytes_
                            ? op.fresh_bytes
                            : 0;
  // A later column chunk streams its rows at its own speed, where the profile has one.
  const double bytes_per_us =
      later_chunk(op) && m.later_chunk_bytes_per_us > 0 ? m.later_chunk_bytes_per_us : m.bytes_per_us;
  return m.launch_us + (op.bytes - cached) / bytes_per_us +
         (cached > 0 ? cached / m.cached_bytes_per_us : 0) + chunk_rows(op) * m.chunk_row_us;
}

double ring_traffic(OpKind kind, double bytes, int ranks) {
  switch (kind) {
    case OpKind::AllReduce: return ring_allreduce_traffic(bytes, ranks);
    case OpKind::AllGather:
    case OpKind::ReduceScatter: return ring_gather_traffic(bytes, ranks);
    default: return 0;
  }
}

double CostModel::AlgorithmCosts::us(double traffic, double bytes) const {
  const double busbw = bus_bytes_per_us.y.empty() ? bytes_per_us : bus_bytes_per_us.at(bytes);
  return latency_us + traffic / busbw;
}

const CostModel::CollectiveCosts& CostModel::level_for(int tp, int devices_per_node) const {
  const bool spans_nodes = tp > devices_per_node;
  if (spans_nodes && !inter_.present) {
    throw_bad_input("profile '" + profile_.name + "' (" + profile_.path + ") has no collectives.inter_node figures, " +
                    "but a TP group of " + std::to_string(tp) + " spans nodes of " + std::to_string(devices_per_node) +
                    " devices: use a multi-node profile");
  }
  return spans_nodes ? inter_ : intra_;
}

void CostModel::throw_pinned_ineligible(const CollectiveCosts& level, int tp) const {
  const AlgorithmCosts& a = level.kinds[0].algorithms[level.pinned];
  throw_bad_input("profile '" + profile_.name + "' (" + profile_.path + ") pins collectives." + level.level +
                  ".algorithm to " + collective_algorithm_name(CollectiveAlgorithm(level.pinned)) + ", which runs on " +
                  std::to_string(a.min_ranks) + " or more ranks, but the TP group has " + std::to_string(tp) +
                  " (as NCCL with NCCL_ALGO set to it, nothing else may run): unpin it or change the TP degree");
}

void CostModel::throw_missing_curve(const CollectiveCosts& level, OpKind kind) const {
  const bool gather = kind == OpKind::AllGather;
  throw_bad_input("profile '" + profile_.name + "' (" + profile_.path + ") has no collectives." + level.level + "." +
                  (gather ? "allgather" : "reduce_scatter") + " curve, which " +
                  (gather ? "an AllGather" : "a ReduceScatter") +
                  " (sequence parallelism) needs: add it (docs/profile-format.md) or use a profile that has it");
}

// Ties go to the algorithm listed first (ring), so a profile whose curves coincide keeps today's choice.
CollectiveCost CostModel::collective_cost(OpKind kind, double bytes, int tp, int devices_per_node) const {
  const int index = collective_index(kind);
  if (tp <= 1 || index < 0) return {};
  const CollectiveCosts& level = level_for(tp, devices_per_node);
  const KindCosts& curves = level.kinds[index];
  if (!curves.present) throw_missing_curve(level, kind);
  const double traffic = ring_traffic(kind, bytes, tp);
  if (level.pinned >= 0) {
    const AlgorithmCosts& a = curves.algorithms[level.pinned];
    if (tp < a.min_ranks) throw_pinned_ineligible(level, tp);
    return {a.us(traffic, bytes), a.sms, collective_algorithm_name(CollectiveAlgorithm(level.pinned))};
  }
  CollectiveCost best{-1, 0, "none"};
  for (int i = 0; i < kNumCollectiveAlgorithms; ++i) {
    const AlgorithmCosts& a = curves.algorithms[i];
    if (!a.present || tp < a.min_ranks) continue;
    const double us = a.us(traffic, bytes);
    if (best.us < 0 || us < best.us) best = {us, a.sms, collective_algorithm_name(CollectiveAlgorithm(i))};
  }
  return best;
}

CollectiveCost CostModel::allreduce(double bytes, int tp, int devices_per_node) const {
  return collective_cost(OpKind::AllReduce, bytes, tp, devices_per_node);
}

CollectiveCost CostModel::collective(const Op& op, int tp, int devices_per_node) const {
  return collective_cost(op.kind, op.bytes, tp, devices_per_node);
}

double CostModel::sync_per_compute(int tp, int devices_per_node) const {
  return tp <= 1 ? 0 : level_for(tp, devices_per_node).sync_per_compute;
}

double CostModel::sync_us(int tp, int devices_per_node) const {
  return tp <= 1 ? 0 : level_for(tp, devices_per_node).sync_us;
}

bool CostModel::has_collective(OpKind kind, int tp, int devices_per_node) const {
  const int index = collective_index(kind);
  if (index < 0) return false;
  const bool spans_nodes = tp > devices_per_node;
  if (spans_nodes && !inter_.present) return false;
  return (spans_nodes ? inter_ : intra_).kinds[index].present;
}

bool CostModel::has_sp_collectives() const {
  for (const CollectiveCosts* level : {&intra_, &inter_}) {
    if (!level->present) continue;
    for (OpKind kind : {OpKind::AllGather, OpKind::ReduceScatter})
      if (!level->kinds[collective_index(kind)].present) return false;
  }
  return true;
}

double CostModel::op_us(const Op& op, int tp, int devices_per_node) const {
  switch (op.kind) {
    case OpKind::Gemm:
      if (profile_.gpu) return gemm_us_on_sms(op, profile_.gpu->sms);
      return blocked_gemm_us(op);
    case OpKind::Attention:
      return attention_us(op);
    case OpKind::AllReduce:
    case OpKind::AllGather:
    case OpKind::ReduceScatter: return collective(op, tp, devices_per_node).us;
    case OpKind::Norm:
    case OpKind::Activation:
    case OpKind::Elementwise:
    case OpKind::Copy:
    case OpKind::Optimizer:
    case OpKind::Embedding:
    case OpKind::Loss: return memory_us(op);
  }
  return memory_us(op.bytes);
}

}  // namespace domino
