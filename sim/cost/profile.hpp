// profile.hpp: a hardware profile, the measured or published figures the cost model turns into op
// durations (docs/profile-format.md). Loaded strictly from YAML; the profiler writes one with save_profile.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/ir/schedule.hpp"
#include "sim/model/model_spec.hpp"

namespace domino {

// One point of an efficiency curve: GEMMs of `gflop` GFLOP reach `efficiency` of the dtype's peak.
// Between points the efficiency is interpolated linearly in log(gflop); outside, the end value holds.
struct EfficiencyPoint {
  double gflop = 0;
  double efficiency = 0;
};

// Which operands a GEMM reads transposed from their row-major storage, as the executor calls it: the
// forward MatMul A·B neither, the input gradient MatMulDgrad A·B^T b, the weight gradient MatMulWgrad
// A^T·B a. A BLAS runs each pair with its own kernel, at its own speed.
struct GemmTranspose {
  bool a = false, b = false;
  auto operator<=>(const GemmTranspose&) const = default;
};
GemmTranspose gemm_transpose(OpCode code);  // non-GEMM codes: neither

// A measured GEMM: C[m,n] = op(A)[m,k] op(B)[k,n] took time_us (launch included). A row without a
// transpose (the 4-column form) gives its time to every transpose pair of the shape. A row with blocks > 1
// (the 7-column form) times a whole op whose rows slice the sequence of several batch entries, which runs
// `blocks` products of this shape back to back (gemm_blocks.hpp): time_us is all of them. Its products share
// an operand that the first leaves in cache, so that the op runs faster than `blocks` lone products.
struct GemmTiming {
  int64_t m = 0, n = 0, k = 0;
  double time_us = 0;
  std::optional<GemmTranspose> transpose = std::nullopt;
  int64_t blocks = 1;
};
// The table's order: (m, n, k), then rows without a transpose before those with one, then (a, b), then
// blocks.
bool gemm_row_less(const GemmTiming& x, const GemmTiming& y);

struct GemmProfile {
  double peak_tflops = 0;
  std::vector<EfficiencyPoint> efficiency;  // gflop strictly increasing, at least one point
  std::vector<GemmTiming> table;            // optional; sorted by gemm_row_less, no duplicates
};

// Memory-bound ops (norm, activation, elementwise, copy, optimizer, embedding, loss) and the launch
// overhead every compute op pays.
// chunk_row_us: what an op on a column chunk (each of its m rows a part of a buffer's row) costs per row
// beyond its bytes: every row is a short run of its own, and where a run ends the prefetcher starts over (the
// profiler's probe of one chunk alone; on a 2-vCPU Xeon about 40 ns per row). In training the first of a row
// block's q chunks pays it for the rows of all q, the later chunks their bytes alone (at
// later_chunk_bandwidth_gbps where given): residual adds at q = 2 on a 2-vCPU AMD EPYC VM, the first chunk at
// its bytes' time plus twice the probe's per-row term, the second at its bytes' time or less. 0: none.
// cached_bandwidth_gbps: the speed of an op's bytes that a collective has just copied out on its core and
// that fit in MemoryProfile::cache_bytes (Op::fresh_bytes); 0: those bytes at bandwidth_gbps like the rest.
struct MemoryCost {
  double bandwidth_gbps = 0;  // GB/s (1e9 bytes per second) achievable
  double launch_overhead_us = 0;
  double chunk_row_us = 0;
  double cached_bandwidth_gbps = 0;
  // Optional: the bandwidth of a row block's later column chunk in training, where it follows the first
  // chunk's pass over the same rows and runs faster than whole rows (calibration fits it on a training trace;
  // a probe of the two adds alone does not show it); 0: bandwidth_gbps.
  double later_chunk_bandwidth_gbps = 0;
};
// The rows a memory-bound op pays chunk_row_us on: on the first of q column chunks (attrs.chunks = q) the m
// rows of each of the q, none on a later chunk or on whole rows.
inline double chunk_rows(const Op& op) {
  return op.chunk == 0 ? double(op.m) * std::max<int>(1, op.attrs.chunks) : 0;
}
// A row block's column chunk after its first (MemoryCost::later_chunk_bandwidth_gbps).
inline bool later_chunk(const Op& op) { return op.chunk > 0; }
struct MemoryProfile {
  double bandwidth_gbps = 0;  // GB/s (1e9 bytes per second) achievable
  double launch_overhead_us = 0;
  // Optional: a memory-bound op kind's own figures (key: to_string(OpKind), e.g. "norm"), replacing the two
  // above for that kind. Norms, optimizer steps and the loss stream through memory differently.
  std::map<std::string, MemoryCost> per_kind;
  // Optional: one opcode's own figures (key: to_string(OpCode), e.g. "LayerNormFwd"), replacing its kind's.
  // The opcodes of one kind differ by up to 10x in time per byte (a norm's forward against its backward).
  std::map<std::string, MemoryCost> per_code = {};
  // Optional: the bytes a core keeps in cache of what it has just written (its L2), for the rows a collective
  // copies out right before a memory-bound op (MemoryCost::cached_bandwidth_gbps); 0: none stays.
  double cache_bytes = 0;
};

// The op kinds that are costed as memory-bound (memory.per_kind keys), and their opcodes (per_code keys).
const std::vector<std::string>& memory_bound_kinds();
const std::vector<std::string>& memory_bound_codes();

// An attention opcode's own figures: launch + flops / compute rate + bytes / bandwidth, the two terms added,
// not the larger of them: a core runs the score products and the row-wise softmax over the probabilities one
// after the other. A rate of 0 leaves its term out (at least one is positive). The bytes are dominated by
// the probabilities' rows, which a sequence slice keeps whole while its FLOPs shrink, so FLOPs alone cannot
// time both a batch slice and a sequence slice.
struct AttentionCost {
  double launch_overhead_us = 0;
  double gflops = 0;          // GFLOP/s (1e9 FLOP per second); 0: no FLOP term
  double bandwidth_gbps = 0;  // GB/s; 0: no byte term
  auto operator<=>(const AttentionCost&) const = default;
};

// Attention runs at relative_efficiency x the GEMM efficiency at the same size, unless it has its own curve.
// per_code (optional; keys AttnFwd, AttnBwd) replaces both for its opcode; not with a gpu section, whose
// mechanism times attention by its tiles.
struct AttentionProfile {
  double relative_efficiency = 1;
  std::vector<EfficiencyPoint> efficiency;  // when non-empty, replaces relative_efficiency
  std::map<std::string, AttentionCost> per_code = {};
};
// The opcodes attention.per_code may name.
const std::vector<std::string>& attention_codes();

// One point of a measured collective curve: messages of `bytes` reach `bus_bandwidth_gbps`.
struct BusBandwidthPoint {
  double bytes = 0;
  double bus_bandwidth_gbps = 0;
};

// The AllReduce algorithms the cost model knows, by NCCL's names for them (NCCL_ALGO): ring, and NVLink
// SHARP (the NVSwitch reduces; inside one NVLink domain only, and only with more than 4 GPUs).
enum class CollectiveAlgorithm : uint8_t { Ring, Nvls };
constexpr int kNumCollectiveAlgorithms = 2;
const char* collective_algorithm_name(CollectiveAlgorithm a);  // "ring", "nvls" (the profile keys)
std::optional<CollectiveAlgorithm> collective_algorithm_from_name(const std::string& name);

// NVLS's rank floor when a profile does not state one (NCCL runs NVLS only on more than 4 GPUs).
constexpr int kDefaultNvlsMinRanks = 5;

// One algorithm's AllReduce curve: latency_us + S * 2(n-1)/n / busbw(S) for S bytes over n ranks (the
// nccl-tests bus-bandwidth convention, the same for every algorithm).
struct CollectiveCurve {
  double latency_us = 0;
  double bus_bandwidth_gbps = 0;         // large-message figure; used when the table is empty
  std::vector<BusBandwidthPoint> table;  // optional; bytes strictly increasing; log-interpolated, clamped
  int sms = 0;                           // SMs its kernels hold while it runs (one per channel); 0: not stated
  int min_ranks = 2;                     // the fewest ranks it runs on
};

// One collective kind's curves on a level, per algorithm: ring (always; NCCL falls back to ring wherever
// nothing else runs) and NVLS (optional, intra_node only). The AllGather and ReduceScatter curves of a level
// take this form: latency_us + S (n-1)/n / busbw(S) for a gathered (full) buffer of S bytes over n ranks (the
// nccl-tests convention for these two: busbw = algbw (n-1)/n).
struct AlgorithmCurves {
  CollectiveCurve ring;
  std::optional<CollectiveCurve> nvls = std::nullopt;
  // Whether the profile must write them in the algorithms form (anything beyond one ring curve).
  bool has_algorithm_figures() const { return ring.sms > 0 || nvls.has_value(); }
};

// One level's AllReduce (inside a node, or across nodes). latency_us is the collective's own start-up cost,
// measured with the ranks arriving together; sync_us is what a collective costs in a training step because
// they do not: the typical gap between the first and the last rank reaching it (their compute drifts apart
// between collectives), which the simulator's one symmetric rank does not otherwise see.
// Every level has a ring curve (the fields below; NCCL falls back to ring where nothing else runs; the
// profile's single-curve form is the ring alone). A level may add NVLS; the cost model takes the fastest
// algorithm eligible at the group size, or the pinned one. The sequence-parallel collectives (AllGather,
// ReduceScatter) have their own curves beside the AllReduce's, optional: a profile without them cannot cost
// those ops (CostModel::has_sp_collectives). sync_us and the pin apply to every kind.
// sync_per_compute makes the skew grow with what the ranks drift by: a collective pays sync_us +
// sync_per_compute x the compute the schedule runs between the previous collective's launch and its own
// (sim/engine/arrival_skew.hpp); 0 (the default) leaves the constant sync_us alone.
struct CollectiveProfile {
  double latency_us = 0;                 // ring
  double bus_bandwidth_gbps = 0;         // ring
  std::vector<BusBandwidthPoint> table;  // ring
  double sync_us = 0;
  double sync_per_compute = 0;           // microseconds of skew per microsecond of compute between, [0, 1]
  int ring_sms = 0;                      // 0: not stated
  std::optional<CollectiveCurve> nvls = std::nullopt;         // intra_node only
  std::optional<CollectiveAlgorithm> pinned = std::nullopt;  // as NCCL_ALGO: only this algorithm (listed)
  std::optional<AlgorithmCurves> allgather = std::nullopt;       // profile key allgather
  std::optional<AlgorithmCurves> reduce_scatter = std::nullopt;  // profile key reduce_scatter

  CollectiveCurve ring() const { return {latency_us, bus_bandwidth_gbps, table, ring_sms, 2}; }
  // Whether the profile must be written in the algorithms form (anything beyond one ring curve).
  bool has_algorithm_figures() const { return ring_sms > 0 || nvls.has_value() || pinned.has_value(); }
};

// While a compute op and a communication op run together, each progresses at 1/(1 + slowdown). A CPU's
// collective also loses comm_delay_during_compute_us once when it runs beside compute: its threads sleep on
// every message and, woken on a core the compute thread holds, wait for it to yield (a scheduler slice), a
// cost per collective rather than per byte. A collective of standalone time T wholly beside compute takes
// T (1 + comm slowdown) + delay; partly beside, the delay in proportion. The compute beside it is slowed only
// while it transfers.
// comm_start_wait_us: a CPU collective whose turn comes while its rank's compute stream runs an op, the
// communication thread asleep, starts when the compute stream stands idle or after a wait, the first to come:
// woken, the thread waits for the core the compute thread holds until the compute thread blocks or the
// kernel lets the woken thread in. The kernel does so sooner the longer the thread slept (what it ran beside
// the compute thread is forgiven as it sleeps): the wait is comm_start_wait_us x exp(-slept /
// comm_start_wait_decay_us), slept the time since the thread's last collective ended (decay 0: no decay). A
// thread still awake from the collective before starts at once, unless that collective's end woke the
// compute thread (its stream idle, waiting): the compute thread takes the core, and the next collective
// waits up to comm_resume_wait_us.
// compute_stall_share is the time a CPU rank's compute stream loses in a training step beyond its ops' own
// (median) times, per unit of them: the slower of the ranks' cores, preemption inside ops and the gaps
// between them. The simulator holds the stream that much longer after each compute op (its span keeps the
// op's own time); a collective beside it moves at its own speed for the stall's share of that time
// (comm_rate_beside_held_op). A stall share above this (the stream idle ten times as long as it computes)
// describes no machine to predict.
constexpr double kMaxComputeStallShare = 10;
// compute_stall_per_op_us is the part of that stall each compute op pays whatever its size: the compute
// stream's gap between two ops as the CPU backend runs them (the worker hands over, reads the clock, records
// the span), 37-44 us per op on a 2-vCPU VM in plans of 152 and 416 compute ops alike, where a share of the
// compute time charged the plan of 416 ops 9 ms too little (docs/fidelity.md, "The compute stream's gaps are
// per op"). The simulator holds the stream that long after each compute op, beside the share; at most this.
constexpr double kMaxComputeStallPerOpUs = 1e5;
// compute_slowdown_with_comm: a CPU rank's compute ops run this much slower throughout an iteration in which
// its ranks communicate, beside a collective or not (on two CPU ranks megatron-sync's ops, none beside a
// collective, took 1-4 % longer than no-comm's same ops in the same launch; the communication threads'
// wake-ups and the ranks' compute in lockstep are the likely causes, not told apart). The simulator stretches
// every compute op of a schedule with a collective to time by it; at most this.
constexpr double kMaxCommComputeSlowdown = 1;
struct InterferenceProfile;
// The flat interference terms a profile may leave out (0 when it does), by their key: the reader, the writer
// and the checks go through this one list. All are >= 0 and zero beside a gpu section.
struct OptionalInterferenceTerm {
  const char* key;
  double InterferenceProfile::*field;
};
extern const OptionalInterferenceTerm kOptionalInterferenceTerms[7];
struct InterferenceProfile {
  double compute_slowdown_during_comm = 0;
  double comm_slowdown_during_compute = 0;
  double comm_delay_during_compute_us = 0;
  double compute_stall_share = 0;
  double compute_stall_per_op_us = 0;
  double comm_start_wait_us = 0;
  double comm_start_wait_decay_us = 0;
  double comm_resume_wait_us = 0;
  double compute_slowdown_with_comm = 0;

  // The wait of a collective due while its rank computes, its thread asleep for `slept_us`.
  double comm_start_wait(double slept_us) const {
    return comm_start_wait_decay_us > 0 ? comm_start_wait_us * std::exp(-slept_us / comm_start_wait_decay_us)
                                        : comm_start_wait_us;
  }

  // The progress rates beside the other stream: a collective's depends on its standalone time (the delay
  // becomes a rate slowdown of delay / standalone_us), a compute op's does not.
  double comm_rate(double standalone_us) const {
    const double delay = standalone_us > 0 ? comm_delay_during_compute_us / standalone_us : 0;
    return 1.0 / (1.0 + comm_slowdown_during_compute + delay);
  }
  // A collective's rate beside a compute op as the simulator holds the stream: the op's own time and its
  // stall after it (compute_stall_share of that time), in which the compute thread lets go of the core and
  // the collective's threads move it at its own speed; at comm_rate while the op runs.
  double comm_rate_beside_held_op(double standalone_us) const {
    return (comm_rate(standalone_us) + compute_stall_share) / (1.0 + compute_stall_share);
  }
  double compute_rate() const { return 1.0 / (1.0 + compute_slowdown_during_comm); }
  // A compute op's rate beside a collective of standalone time standalone_us: the compute slowdown only for
  // the share of the collective's time it transfers, not the delay it waits for a core.
  double compute_rate_beside(double standalone_us) const {
    const double active = standalone_us * (1 + comm_slowdown_during_compute);
    const double share = active > 0 ? active / (active + comm_delay_during_compute_us) : 1.0;
    return 1.0 / (1.0 + compute_slowdown_during_comm * share);
  }
};

// GPU profiles: what replaces the flat interference factors with a mechanism (docs/profile-format.md).
// GEMMs are timed from their CTA tiles in waves over the SMs; while a collective runs it holds
// collective_sms SMs (GEMMs and attention re-run their waves over the rest) and moves
// collective_hbm_bytes_per_bus_byte local HBM bytes per bus byte (memory-bound ops and the collective share
// hbm_bandwidth_gbps in proportion to their demand).
struct GpuProfile {
  int sms = 0;                       // streaming multiprocessors per GPU
  int tile_m = 0, tile_n = 0;        // the GEMM backend's CTA tile (output rows x columns)
  double mainloop_efficiency = 0;    // fraction of an SM's peak a tile's k loop reaches, (0, 1]
  double tile_fixed_us = 0;          // per tile and wave: pipeline fill + epilogue, independent of k
  double transpose_efficiency = 1;   // dgrad/wgrad (a transposed operand) relative to forward, (0, 1]
  int attention_tile_m = 0;          // query rows per attention CTA (one CTA per block of rows per head)
  int collective_sms = 0;            // SMs a running collective holds where its algorithm does not say
  double hbm_bandwidth_gbps = 0;     // achievable HBM bandwidth, all traffic together
  double collective_hbm_bytes_per_bus_byte = 0;
  // More CTA tiles the GEMM library picks from by shape (optional): each GEMM runs with the tile, of these
  // and tile_m x tile_n, that is fastest alone on every SM (ties: the first listed, tile_m x tile_n first).
  std::vector<std::array<int, 2>> other_tiles = {};
};

// Provenance the profiler records; all optional.
struct ProfileMetadata {
  std::string machine;
  std::string date;
  std::string build_flags;
  std::map<std::string, std::string> library_versions;
  std::map<std::string, double> spread;  // relative run-to-run spread per measured quantity
  bool empty() const {
    return machine.empty() && date.empty() && build_flags.empty() && library_versions.empty() && spread.empty();
  }
};

constexpr int kNumDTypes = 3;  // indexed by DType: BF16, FP16, FP32
const char* profile_dtype_key(DType d);  // "bf16", "fp16", "fp32"

struct Profile {
  std::string name;
  std::string source;  // where the figures come from ("public figures", "measured by domino-profile")
  std::string notes;
  std::string path;    // file it was loaded from ("" when built in code)
  int devices_per_node = 1;
  int nodes = 0;       // 0: not stated (no limit on the TP degree beyond inter_node being present)
  std::array<std::optional<GemmProfile>, kNumDTypes> gemm;
  MemoryProfile memory;
  AttentionProfile attention;
  CollectiveProfile intra_node;
  std::optional<CollectiveProfile> inter_node;  // required for TP groups larger than devices_per_node
  InterferenceProfile interference;  // flat factors; must be zero when gpu is present
  std::optional<GpuProfile> gpu;     // absent: the flat interference factors apply
  ProfileMetadata metadata;
};

// Loads and validates a profile; BadInput with file:line:col on any problem (unknown key with the closest
// suggested, missing key, wrong type, non-positive rate, unsorted table).
Profile load_profile(const std::string& path);
Profile load_profile_string(const std::string& yaml, const std::string& name);
// Checks the invariants load_profile enforces (for profiles built in code); BadInput naming the field.
void validate_profile(const Profile& p);
// YAML text that load_profile reads back to an identical Profile (numbers round-trip exactly).
std::string profile_to_yaml(const Profile& p);
// Validates, then writes through a temporary file and a rename.
void save_profile(const Profile& p, const std::string& path);

// A profile argument: a path, or a bare name looked up as profiles/NAME.yaml (current directory, then the
// source tree). BadInput listing the shipped profiles when neither exists.
std::string resolve_profile_path(const std::string& path_or_name);
// The profile tools use when none is given: cpu-dev for fp32 models under 1e9 parameters (the CPU backend's
// models), else dgx-h100 for TP groups within one 8-GPU node, else h100-multinode.
std::string default_profile_name(const ModelSpec& model);

}  // namespace domino
