// cost_model.hpp: standalone duration of one op from a hardware profile (no interference: the simulator
// applies that over time). Called millions of times by the tuner, so op_us allocates nothing and does
// no string work; everything derivable from the profile is precomputed in the constructor.
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "sim/cost/profile.hpp"
#include "sim/ir/collective_traffic.hpp"
#include "sim/ir/schedule.hpp"

namespace domino {

// A collective (AllReduce, AllGather, ReduceScatter) by the algorithm NCCL would pick: the fastest by the
// profile's curves of its kind among the algorithms eligible at the group size, or the one the profile pins.
// algorithm is "ring" or "nvls", or "none" when nothing is communicated (a group of one, or an op that is not
// a collective: 0 us, no SMs).
struct CollectiveCost {
  double us = 0;
  int sms = 0;  // SMs its kernels hold while it runs; 0 where the profile does not state them
  const char* algorithm = "none";
};

// Bytes each rank moves in a ring collective of `kind` over `ranks` ranks (AllReduce: 2 (n-1)/n of the message;
// AllGather, ReduceScatter: (n-1)/n of the gathered buffer); 0 for an op that is not a collective.
double ring_traffic(OpKind kind, double bytes, int ranks);

class CostModel {
 public:
  explicit CostModel(Profile profile);  // validates the profile (BadInput)

  const Profile& profile() const { return profile_; }

  // Microseconds the op takes alone on a device. tp = ranks in the AllReduce; TP groups larger than
  // devices_per_node use the inter-node collective figures. Depends only on the op's kind, shape,
  // flops, bytes and dtype. BadInput when the profile lacks the op's dtype or the inter-node figures.
  double op_us(const Op& op, int tp, int devices_per_node) const;

  // Pieces of op_us, exposed for tests and reports.
  // t: the operands the GEMM reads transposed (gemm_transpose of its opcode); the table's rows of that
  // pair (and its 4-column rows) time it.
  double gemm_us(DType dtype, int64_t m, int64_t n, int64_t k, double flops, double bytes,
                 GemmTranspose t = {}) const;
  // A GEMM op as a backend runs it without a gpu section: OpAttrs::row_blocks products of one block's shape,
  // timed by the table's row of that many blocks where it has one (GemmTiming::blocks).
  double blocked_gemm_us(const Op& op) const;
  double attention_us(DType dtype, double flops, double bytes) const;  // the curve (or relative efficiency)
  // An attention op: its opcode's own figures (attention.per_code) where it has them, else the curve.
  double attention_us(const Op& op) const;
  double memory_us(double bytes) const;                // the profile's general memory figures
  double memory_us(OpKind kind, double bytes) const;   // the kind's own figures when it has them
  double memory_us(const Op& op) const;                // the opcode's own figures, else its kind's
  double allreduce_us(double bytes, int tp, int devices_per_node) const { return allreduce(bytes, tp, devices_per_node).us; }
  CollectiveCost allreduce(double bytes, int tp, int devices_per_node) const;
  // A collective of `kind` of S bytes (AllGather, ReduceScatter: the gathered buffer, nccl-tests' "size"):
  // sync + latency + ring_traffic(kind, S, tp) / busbw(S) of the chosen algorithm. BadInput naming the missing
  // curve when the profile has none for the kind at the group's level.
  CollectiveCost collective_cost(OpKind kind, double bytes, int tp, int devices_per_node) const;
  // A collective op's cost, algorithm and SMs (op_us of a collective is collective(...).us).
  CollectiveCost collective(const Op& op, int tp, int devices_per_node) const;
  // The arrival skew's growth with the compute between collectives at the level a group of tp ranks uses
  // (collectives.<level>.sync_per_compute; 0 for a group of one). The simulator adds it per collective
  // (sim/engine/arrival_skew.hpp): unlike sync_us it depends on the schedule, not on the op alone.
  double sync_per_compute(int tp, int devices_per_node) const;
  // The constant arrival skew at that level (collectives.<level>.sync_us; 0 for a group of one), which
  // collective_cost includes; the simulator takes it back from a collective the ranks reach aligned.
  double sync_us(int tp, int devices_per_node) const;
  // Whether the profile has curves for `kind` at the level a group of tp ranks uses (AllReduce: always).
  bool has_collective(OpKind kind, int tp, int devices_per_node) const;
  // Whether every level of the profile has AllGather and ReduceScatter curves, so that sequence-parallel plans
  // can be costed on it at any group size the profile covers (the tuner skips them where not).
  bool has_sp_collectives() const;
  double gemm_efficiency(DType dtype, double flops) const;  // from the curve, before any table
  bool has_dtype(DType dtype) const { return dtype_[static_cast<int>(dtype)].present; }

  // --- GPU profiles (a gpu section; cost_model_gpu.cpp) ---
  bool models_sharing() const { return profile_.gpu.has_value(); }
  int sms() const { return profile_.gpu ? profile_.gpu->sms : 0; }
  // A GEMM's (or attention op's) time alone on `sms_available` SMs: its CTA tiles run in
  // ceil(tiles / sms_available) waves. op_us is this at gpu.sms. Without a gpu section, or for other
  // kinds (not collectives), op_us: their time does not depend on the SM count here.
  double gemm_us_on_sms(const Op& op, int sms_available) const;
  double blocked_gemm_us_on_sms(const Op& op, int sms_available) const;  // gemm_us_on_sms of row_blocks > 1
  // CTA tiles of a GEMM (with the tile it runs with) or attention op; 0 for other kinds or without a gpu
  // section.
  int64_t op_tiles(const Op& op) const;
  // SMs a collective holds while it runs: its algorithm's own count (collectives.*.algorithms.*.sms), else
  // gpu.collective_sms.
  int collective_sms(const Op& op, int tp, int devices_per_node) const;
  // Local HBM bytes a collective reads and writes over its run (gpu.collective_hbm_bytes_per_bus_byte x
  // the bytes each rank puts on the bus); 0 without a gpu section.
  double collective_hbm_bytes(const Op& op, int tp) const;
  double hbm_bytes_per_us() const { return gpu_.hbm_bytes_per_us; }

 private:
  // A curve in log space: y interpolated linearly in x = log(value), clamped at the ends.
  struct LogCurve {
    std::vector<double> log_x, y;
    double at(double x) const;
  };
  struct TableRow {
    double log_m, log_n, log_k;
    double flops_per_us;  // the measured row's throughput
    int64_t m, n, k;
    double time_us;
    std::optional<GemmTranspose> transpose;  // none: the row times every transpose pair
    int64_t blocks;                          // > 1: a whole op of that many products (GemmTiming::blocks)
  };
  struct DTypeCosts {
    bool present = false;
    double peak_flops_per_us = 0;
    LogCurve efficiency;
    std::vector<TableRow> table;
  };
  struct AlgorithmCosts {
    bool present = false;
    double latency_us = 0;      // the level's arrival skew (sync_us) included
    double bytes_per_us = 0;    // bus bandwidth
    LogCurve bus_bytes_per_us;  // empty: constant bytes_per_us
    int sms = 0;
    int min_ranks = 2;
    // traffic: the bytes each rank moves (ring_traffic); bytes: the message, which the table is indexed by.
    double us(double traffic, double bytes) const;
  };
  // One collective kind's algorithms on a level.
  struct KindCosts {
    bool present = false;
    std::array<AlgorithmCosts, kNumCollectiveAlgorithms> algorithms;  // indexed by CollectiveAlgorithm
  };
  static constexpr int kNumCollectiveKinds = 3;  // AllReduce, AllGather, ReduceScatter
  struct CollectiveCosts {
    bool present = false;
    std::array<KindCosts, kNumCollectiveKinds> kinds;  // indexed by collective_index(kind)
    int pinned = -1;                                    // -1: the fastest eligible
    double sync_us = 0;
    double sync_per_compute = 0;
    const char* level = "";                             // for messages
  };

  // Precomputed from the gpu section.
  struct GpuCosts {
    std::vector<std::array<int, 2>> tiles;  // tile_m x tile_n first, then other_tiles
    double hbm_bytes_per_us = 0;
  };

  const DTypeCosts& costs(DType dtype) const;
  // A GEMM's time on `sms_available` SMs with one CTA tile; the tile its library would run it with.
  double tile_model_us(const Op& op, int sms_available, const std::array<int, 2>& tile) const;
  struct TileChoice {
    const std::array<int, 2>* tile;
    double us_on_all_sms;
  };
  TileChoice gemm_tile(const Op& op) const;
  double roofline_us(double flops, double peak_flops_per_us, double efficiency, double bytes) const;
  double table_us(const DTypeCosts& c, int64_t m, int64_t n, int64_t k, GemmTranspose t, double flops) const;
  static double exact_row_us(const DTypeCosts& c, int64_t m, int64_t n, int64_t k, GemmTranspose t,
                             int64_t blocks);
  static void fill_collective(CollectiveCosts& c, const CollectiveProfile& p, const char* level);
  static int collective_index(OpKind kind);  // 0 AllReduce, 1 AllGather, 2 ReduceScatter
  const CollectiveCosts& level_for(int tp, int devices_per_node) const;
  [[noreturn]] void throw_pinned_ineligible(const CollectiveCosts& level, int tp) const;
  [[noreturn]] void throw_missing_curve(const CollectiveCosts& level, OpKind kind) const;

  Profile profile_;
  std::array<DTypeCosts, kNumDTypes> dtype_;
  LogCurve attention_curve_;  // empty: relative to the GEMM curve
  double mem_bytes_per_us_ = 0;
  struct KindMemory {
    double bytes_per_us = 0, launch_us = 0, chunk_row_us = 0;
    double cached_bytes_per_us = 0;  // 0: an op's fresh bytes at bytes_per_us
    double later_chunk_bytes_per_us = 0;  // 0: a later column chunk's bytes at bytes_per_us
  };
  static KindMemory kind_memory_of(const MemoryCost& c);
  double cache_bytes_ = 0;  // memory.cache_bytes
  std::array<KindMemory, kNumOpKinds> kind_memory_{};
  // Per opcode: its own figures (memory.per_code), if it has them.
  std::array<std::optional<KindMemory>, size_t(OpCode::ReduceScatter) + 1> code_memory_{};
  // attention.per_code, indexed by the opcode's distance from AttnFwd (AttnFwd, AttnBwd).
  struct AttentionCode {
    double launch_us = 0, us_per_flop = 0, us_per_byte = 0;
  };
  std::array<std::optional<AttentionCode>, 2> attention_code_{};
  double launch_us_ = 0;
  CollectiveCosts intra_, inter_;
  GpuCosts gpu_;
};

}  // namespace domino
