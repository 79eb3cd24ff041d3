// cuda_norm.cu: LayerNorm and RMSNorm forward and backward (one block per row, fp32 arithmetic).
#include "executor/cuda/cuda_common.cuh"

namespace domino::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxChunks = 8;

template <typename T>
struct Chunks {
  View<T> v[kMaxChunks];
  int n;
  int64_t width;  // columns per chunk
  __device__ __forceinline__ float at(int64_t r, int64_t c) const {
    const int k = static_cast<int>(c / width);
    return to_f(v[k].row(r)[c - k * width]);
  }
};

__device__ float block_sum(float x) {
  __shared__ float warp_sums[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) warp_sums[warp] = x;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
  return total;
}

template <typename T>
__global__ void norm_fwd_kernel(View<T> x, View<T> g, View<T> b, bool has_beta, View<T> y, View<float> st,
                                float eps, bool rms) {
  const int64_t r = blockIdx.x;
  const int64_t h = x.ncols;
  const T* xr = x.row(r);
  float sum = 0;
  if (!rms) {
    for (int64_t c = threadIdx.x; c < h; c += kThreads) sum += to_f(xr[c]);
    sum = block_sum(sum);
  }
  const float mean = rms ? 0.f : sum / h;
  // Second pass over the row (in cache) for the variance: E[x^2] - mean^2 cancels when |mean| >> std.
  float sq = 0;
  for (int64_t c = threadIdx.x; c < h; c += kThreads) {
    const float v = to_f(xr[c]) - mean;
    sq += v * v;
  }
  sq = block_sum(sq);
  const float rstd = rsqrtf(sq / h + eps);
  T* yr = y.row(r);
  for (int64_t c = threadIdx.x; c < h; c += kThreads) {
    float v = (to_f(xr[c]) - mean) * rstd * to_f(g.base[c]);
    if (has_beta) v += to_f(b.base[c]);
    yr[c] = from_f<T>(v);
  }
  if (threadIdx.x == 0) {  // the statistics stay fp32 whatever T (allocate() stores that buffer as fp32)
    st.row(r)[0] = mean;
    st.row(r)[1] = rstd;
  }
}

template <typename T>
__global__ void norm_bwd_dx_kernel(View<T> x, View<float> st, View<T> g, Chunks<T> dy, View<T> dx, bool accumulate,
                                   bool rms) {
  const int64_t r = blockIdx.x;
  const int64_t h = x.ncols;
  const T* xr = x.row(r);
  const float mean = st.row(r)[0], rstd = st.row(r)[1];
  float s1 = 0, s2 = 0;
  for (int64_t c = threadIdx.x; c < h; c += kThreads) {
    const float xhat = (to_f(xr[c]) - mean) * rstd;
    const float dyg = dy.at(r, c) * to_f(g.base[c]);
    s1 += dyg;
    s2 += dyg * xhat;
  }
  s1 = block_sum(s1) / h;
  s2 = block_sum(s2) / h;
  T* dxr = dx.row(r);
  for (int64_t c = threadIdx.x; c < h; c += kThreads) {
    const float xhat = (to_f(xr[c]) - mean) * rstd;
    const float dyg = dy.at(r, c) * to_f(g.base[c]);
    float v = rstd * (dyg - (rms ? 0.f : s1) - xhat * s2);
    if (accumulate) v += to_f(dxr[c]);
    dxr[c] = from_f<T>(v);
  }
}

// Partial column sums over a band of rows, added atomically into the fp32 scratch [dgamma | dbeta].
template <typename T>
__global__ void norm_bwd_params_kernel(View<T> x, View<float> st, Chunks<T> dy, float* scratch, int64_t rows_per_band) {
  const int64_t h = x.ncols;
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= h) return;
  const int64_t r0 = blockIdx.y * rows_per_band;
  const int64_t r1 = min(r0 + rows_per_band, x.rows());
  float dg = 0, db = 0;
  for (int64_t r = r0; r < r1; ++r) {
    const float mean = st.row(r)[0], rstd = st.row(r)[1];
    const float d = dy.at(r, c);
    dg += d * (to_f(x.row(r)[c]) - mean) * rstd;
    db += d;
  }
  atomicAdd(&scratch[c], dg);
  atomicAdd(&scratch[h + c], db);
}

template <typename T>
__global__ void store_params_kernel(const float* scratch, int64_t h, View<T> dg, View<T> db, bool has_beta,
                                    bool accumulate) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= h) return;
  dg.base[c] = from_f<T>(scratch[c] + (accumulate ? to_f(dg.base[c]) : 0.f));
  if (has_beta) db.base[c] = from_f<T>(scratch[h + c] + (accumulate ? to_f(db.base[c]) : 0.f));
}

}  // namespace

void norm_fwd(const NormFwdArgs& a, StreamHandle s) {
  const DevView &x = a.x, &gamma = a.gamma, *beta = a.beta, &y = a.y, &stats = a.stats;
  const float eps = a.eps;
  const bool rms = a.rms;
  if (x.rows() == 0) return;
  if (stats.elt != Elt::F32) throw_runtime("norm_fwd: the statistics buffer must be fp32");
  DOMINO_DISPATCH_ELT(x.elt, {
    norm_fwd_kernel<T><<<unsigned(x.rows()), kThreads, 0, stream_of(s)>>>(
        view_of<T>(x), view_of<T>(gamma), beta ? view_of<T>(*beta) : view_of<T>(gamma), beta != nullptr,
        view_of<T>(y), view_of<float>(stats), eps, rms);
  });
  DOMINO_CUDA_LAUNCHED("norm_fwd_kernel");
}

void norm_bwd(const NormBwdArgs& a, StreamHandle s) {
  const DevView &x = a.x, &stats = a.stats, &gamma = a.gamma, *dy_chunks = a.dy_chunks, &dx = a.dx;
  const DevView &dgamma = a.dgamma, *dbeta = a.dbeta;
  const int n_chunks = a.n_chunks;
  const bool accumulate = a.accumulate, accumulate_params = a.accumulate_params, rms = a.rms;
  float* scratch = a.scratch;
  if (n_chunks < 1 || n_chunks > kMaxChunks) throw_runtime("norm_bwd: unsupported number of dy chunks");
  if (stats.elt != Elt::F32) throw_runtime("norm_bwd: the statistics buffer must be fp32");
  const int64_t h = x.ncols, rows = x.rows();
  DOMINO_DISPATCH_ELT(x.elt, {
    Chunks<T> dy{};
    dy.n = n_chunks;
    dy.width = h / n_chunks;
    for (int i = 0; i < n_chunks; ++i) dy.v[i] = view_of<T>(dy_chunks[i]);
    norm_bwd_dx_kernel<T><<<unsigned(rows), kThreads, 0, stream_of(s)>>>(
        view_of<T>(x), view_of<float>(stats), view_of<T>(gamma), dy, view_of<T>(dx), accumulate, rms);
    DOMINO_CUDA_LAUNCHED("norm_bwd_dx_kernel");
    DOMINO_CUDA_CHECK(cudaMemsetAsync(scratch, 0, sizeof(float) * 2 * h, stream_of(s)));
    const int64_t band = 64;
    const dim3 grid(unsigned((h + kThreads - 1) / kThreads), unsigned((rows + band - 1) / band));
    norm_bwd_params_kernel<T><<<grid, kThreads, 0, stream_of(s)>>>(view_of<T>(x), view_of<float>(stats), dy,
                                                                   scratch, band);
    DOMINO_CUDA_LAUNCHED("norm_bwd_params_kernel");
    store_params_kernel<T><<<grid_for(h), 256, 0, stream_of(s)>>>(
        scratch, h, view_of<T>(dgamma), dbeta ? view_of<T>(*dbeta) : view_of<T>(dgamma), dbeta != nullptr,
        accumulate_params);
    DOMINO_CUDA_LAUNCHED("store_params_kernel");
  });
}

}  // namespace domino::cuda
