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
void norm_fwd(const DevView& x, const DevView& gamma, const DevView* beta, const DevView& y, const DevView& stats,
              float eps, bool rms, StreamHandle s);
// dy given as n column chunks; dgamma/dbeta reduced over rows through a fp32 scratch of 2*h floats.
void norm_bwd(const DevView& x, const DevView& stats, const DevView& gamma, const DevView* dy_chunks, int n_chunks,
              const DevView& dx, bool accumulate, const DevView& dgamma, const DevView* dbeta,
              bool accumulate_params, bool rms, float* scratch, StreamHandle s);

void gelu_fwd(const DevView& x, const DevView& y, StreamHandle s);
void gelu_bwd(const DevView& x, const DevView& dy, const DevView& dx, StreamHandle s);
void swiglu_fwd(const DevView& x, const DevView& y, StreamHandle s);
void swiglu_bwd(const DevView& x, const DevView& dy, const DevView& dx, StreamHandle s);
void rope(const DevView& x, int heads, int head_dim, bool inverse, StreamHandle s);
void residual_add(const DevView& a, const DevView& b, const DevView* bias, const DevView& out, StreamHandle s);
void add_bias(const DevView& out, const DevView& bias, StreamHandle s);
void bias_grad(const DevView& dy, const DevView& dbias, bool accumulate, float* scratch, StreamHandle s);
void embedding_fwd(const DevView& tokens, const DevView& table, const DevView* pos, const DevView& out, StreamHandle s);
// fp32_scratch: dtable's and dpos's elements as fp32 sums; used (and needed) when dtable is 16-bit.
void embedding_bwd(const DevView& tokens, const DevView& dy, const DevView& dtable, const DevView* dpos,
                   bool accumulate, float* fp32_scratch, StreamHandle s);
void cross_entropy(const DevView& logits, const DevView& targets, const DevView& loss, const DevView& dlogits,
                   double tokens, bool accumulate, float* scratch, StreamHandle s);

// Attention pieces (the GEMMs go through cuBLAS). P is [rows, heads*key_stride] of one batch block.
// Causal softmax in place on the scores of query rows [q0, q0+nq) against keys [0, nk): scale, mask
// key > query, normalise; entries of masked keys set to 0.
void causal_softmax_fwd(const DevView& p, int heads, int64_t key_stride, int64_t nk, float scale, StreamHandle s);
// dS = P * (dP - rowsum(dP * P)) * scale, in place on dp.
void causal_softmax_bwd(const DevView& p, const DevView& dp, int heads, int64_t key_stride, int64_t nk,
                        float scale, StreamHandle s);

void adam_step(const DevView& grad, const DevView& param, float* master, float* m, float* v, int64_t n,
               float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step, StreamHandle s);
void sgd_step(const DevView& grad, const DevView& param, float* master, float* mom, int64_t n, float lr,
              float momentum, float weight_decay, StreamHandle s);

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

// --emulate-comm: moves `traffic_bytes` through device memory (read + write of a ring AllReduce's per-rank
// traffic) on `sms` blocks, paced so that it takes at least latency_us + traffic_bytes / bytes_per_us.
void emulated_allreduce(void* buffer, int64_t buffer_bytes, int64_t traffic_bytes, int sms, double bytes_per_us,
                        double latency_us, double clock_ghz, StreamHandle s);

}  // namespace domino::cuda
