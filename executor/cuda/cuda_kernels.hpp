// cuda_kernels.hpp: host-callable launchers for the CUDA backend's own kernels (everything that is not a
// cuBLAS GEMM or an NCCL collective). Plain C++ types only, so host code never needs nvcc.
#pragma once

#include <cstdint>

namespace domino::cuda {

enum class Elt : uint8_t { F32, BF16, F16 };
int elt_bytes(Elt e);

// A region of a device buffer (see Region in sim/ir/schedule.hpp): rows are nbatch blocks of
// rows_per_batch rows; element (r, c) lives at base + b*batch_stride + s*row_stride + c (in elements),
// with b = r / rows_per_batch, s = r % rows_per_batch. seq0 is the seq index of the first row of a block
// (positions for rotary embedding and the causal mask).
struct DevView {
  void* base = nullptr;
  Elt elt = Elt::F32;
  int64_t row_stride = 0;
  int64_t batch_stride = 0;
  int64_t rows_per_batch = 0;
  int64_t nbatch = 0;
  int64_t ncols = 0;
  int64_t seq0 = 0;
  int64_t rows() const { return nbatch * rows_per_batch; }
};

using StreamHandle = void*;  // cudaStream_t

// Normalisation. stats holds (mean, rstd) per row; rms: mean stored as 0 and no beta.
struct NormFwdArgs {
  DevView x, gamma;
  const DevView* beta = nullptr;  // LayerNorm only
  DevView y, stats;               // stats: fp32
  float eps = 1e-5f;
  bool rms = false;
};
void norm_fwd(const NormFwdArgs& a, StreamHandle s);
// dy given as n column chunks; dgamma/dbeta reduced over rows through a fp32 scratch of 2*h floats.
struct NormBwdArgs {
  DevView x, stats, gamma;
  const DevView* dy_chunks = nullptr;  // n_chunks views, chunk c covering columns [c*h/n, (c+1)*h/n) of dy
  int n_chunks = 1;
  DevView dx;
  bool accumulate = false;  // dx
  DevView dgamma;
  const DevView* dbeta = nullptr;  // LayerNorm only
  bool accumulate_params = false;  // dgamma, dbeta
  bool rms = false;
  float* scratch = nullptr;
};
void norm_bwd(const NormBwdArgs& a, StreamHandle s);

void gelu_fwd(const DevView& x, const DevView& y, StreamHandle s);
void gelu_bwd(const DevView& x, const DevView& dy, const DevView& dx, StreamHandle s);
void swiglu_fwd(const DevView& x, const DevView& y, StreamHandle s);
void swiglu_bwd(const DevView& x, const DevView& dy, const DevView& dx, StreamHandle s);
void relu_fwd(const DevView& x, const DevView& y, StreamHandle s);
void relu_bwd(const DevView& x, const DevView& dy, const DevView& dx, StreamHandle s);
// GeGLU: gelu (the tanh approximation of gelu_fwd) of the gate times up; layout as SwiGLU.
void geglu_fwd(const DevView& x, const DevView& y, StreamHandle s);
void geglu_bwd(const DevView& x, const DevView& dy, const DevView& dx, StreamHandle s);
// Rotates the first rotary_dims columns of each head (rotate-half within them; 0: all head_dim).
void rope(const DevView& x, int heads, int head_dim, int rotary_dims, bool inverse, StreamHandle s);
void residual_add(const DevView& a, const DevView& b, const DevView* bias, const DevView& out, StreamHandle s);
void add_bias(const DevView& out, const DevView& bias, StreamHandle s);
void bias_grad(const DevView& dy, const DevView& dbias, bool accumulate, float* scratch, StreamHandle s);
// Vocabulary-parallel embedding: the table holds ids [first, first + its rows); other tokens give zeros.
struct EmbeddingFwdArgs {
  DevView tokens, table, out;
  int64_t first = 0;
};
void embedding_fwd(const EmbeddingFwdArgs& a, StreamHandle s);
// Where a row's position comes from: its seq index (part == 0), or, on a sequence-sharded buffer, the group
// layout (sim/ir/schedule.hpp SpLayout): local row t of `rank` sits at (t / part) * group_rows + rank * part +
// t % part.
struct RowPositions {
  int64_t part = 0, group_rows = 0;
  int rank = 0;
};
void position_add(const DevView& x, const DevView& pos, const DevView& out, const RowPositions& at, StreamHandle s);
struct EmbeddingBwdArgs {
  DevView tokens, dy, dtable;
  int64_t first = 0;              // the table's first vocabulary id
  const DevView* dpos = nullptr;  // GPT's positional table gradient
  bool accumulate = false;         // dtable (a tied head's weight gradient is already there)
  bool accumulate_pos = false;     // dpos
  float* fp32_scratch = nullptr;  // dtable's and dpos's elements as fp32 sums; needed when dtable is 16-bit
};
void embedding_bwd(const EmbeddingBwdArgs& a, StreamHandle s);

// Vocabulary-parallel cross-entropy (cuda_vocab_loss.cu), see LogitMax / LogitSumExp / CrossEntropy in
// sim/ir/schedule.hpp. The logits' columns are ids [first, first + ncols), of which the first `real` are
// vocabulary ids and the rest padding (VocabShard::real()); max and sums are fp32 [rows,1] and [rows,2].
struct VocabLossArgs {
  DevView logits, targets, max, sums;
  int64_t first = 0, real = 0;
  DevView loss, dlogits;     // CrossEntropy only; loss fp32
  double tokens = 1;         // the mean is over this many tokens
  bool accumulate = false;   // loss
  float* scratch = nullptr;  // one float
};
void logit_max(const VocabLossArgs& a, StreamHandle s);
void logit_sum_exp(const VocabLossArgs& a, StreamHandle s);
void vocab_cross_entropy(const VocabLossArgs& a, StreamHandle s);

// Attention pieces (the GEMMs go through cuBLAS). P is [rows, heads*key_stride] of one batch block.
struct SoftmaxShape {
  int heads = 0;
  int64_t key_stride = 0;  // columns per head in P
  int64_t nk = 0;          // keys [0, nk)
  float scale = 1.f;
  int64_t window = 0;      // sliding window: keys (query - window, query] only; 0: none
};
// Causal softmax in place on the scores of query rows [q0, q0+nq) against keys [0, nk): scale, mask
// key > query (and key <= query - window), normalise; entries of masked keys set to 0.
void causal_softmax_fwd(const DevView& p, const SoftmaxShape& shape, StreamHandle s);
// dS = P * (dP - rowsum(dP * P)) * scale, in place on dp.
void causal_softmax_bwd(const DevView& p, const DevView& dp, const SoftmaxShape& shape, StreamHandle s);

// Optimizer steps on whole (dense) buffers of n elements; master == nullptr: the parameter is fp32 itself.
struct AdamStepArgs {
  DevView grad, param;
  float* master = nullptr;
  float* m = nullptr;  // first moment
  float* v = nullptr;  // second moment
  int64_t n = 0;
  float lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  int64_t step = 1;  // 1-based (bias correction)
};
void adam_step(const AdamStepArgs& a, StreamHandle s);
struct SgdStepArgs {
  DevView grad, param;
  float* master = nullptr;
  float* mom = nullptr;
  int64_t n = 0;
  float lr = 0, momentum = 0, weight_decay = 0;
};
void sgd_step(const SgdStepArgs& a, StreamHandle s);

// Fills a view with NaN (tests poison outputs before each run).
void poison(const DevView& v, StreamHandle s);
// Fills a view with pseudo-random values in [-1, 1) (timing data for the profiler and benchmarks).
void fill_random(const DevView& v, uint32_t seed, StreamHandle s);
// A dense rows x cols matrix at base as a view.
inline DevView dense_view(void* base, Elt elt, int64_t rows, int64_t cols) {
  return DevView{base, elt, cols, rows * cols, rows, 1, cols, 0};
}
// Copies between a device view and a dense fp32 device array (for checks and dumps).
void view_to_f32(const DevView& v, float* dense, StreamHandle s);
void f32_to_view(const float* dense, const DevView& v, StreamHandle s);
// Scans a view for NaN/Inf; sets *flag (device int) to 1 when found.
void find_nonfinite(const DevView& v, int* flag, StreamHandle s);

// Sequence-parallel collectives (cuda_sp_staging.cu): rows copied between a region and the contiguous staging
// NCCL exchanges, laid out rank block after rank block (executor/runtime/sp_collective.hpp). Staged row d lies
// in block d / local_rows; row t of block r is region row (t / (groups part)) * groups * group_rows +
// ((t / part) % groups) * group_rows + r * part + t % part. A full region maps `ranks` = tp blocks; this rank's
// own rows map one block with group_rows = part (region row = t).
struct SpRowMap {
  int64_t local_rows = 0;  // rows of one block (one rank's rows of the op's groups)
  int64_t groups = 1, part = 1, group_rows = 1;
  int ranks = 1;           // blocks mapped
};
// Staging (the view's element type, dense rows of v.ncols) <- the view's rows.
void sp_to_staging(const DevView& v, const SpRowMap& map, void* staging, StreamHandle s);
// The view's rows (+)= staging.
void sp_from_staging(const void* staging, const SpRowMap& map, const DevView& v, bool accumulate, StreamHandle s);

// --emulate-comm: moves `traffic_bytes` through device memory (read + write of a ring collective's per-rank
// traffic) on `sms` blocks, paced so that it takes at least latency_us + traffic_bytes / bytes_per_us.
struct EmulatedCollectiveArgs {
  void* buffer = nullptr;
  int64_t buffer_bytes = 0;
  int64_t traffic_bytes = 0;
  int sms = 1;
  double bytes_per_us = 0;  // 0: latency only
  double latency_us = 0;
  double clock_ghz = 1;     // the SM clock the pacing counts in
};
void emulated_collective(const EmulatedCollectiveArgs& a, StreamHandle s);

}  // namespace domino::cuda
