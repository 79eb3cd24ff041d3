// cuda_pointwise.cu: element-wise kernels: activations (GeLU, ReLU, SwiGLU, GeGLU), rotary embedding,
// residual add, bias gradient, embedding lookup (of one vocabulary shard) and its gradient, positional add,
// poisoning, conversion and NaN scans.
#include "executor/cuda/cuda_common.cuh"

namespace domino::cuda {
namespace {

#define DOMINO_FOR_EACH(n) for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

__device__ __forceinline__ float gelu(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  return 0.5f * x * (1.f + tanhf(k * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float gelu_grad(float x) {
  const float k = 0.7978845608028654f;
  const float u = k * (x + 0.044715f * x * x * x);
  const float t = tanhf(u);
  return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * k * (1.f + 3.f * 0.044715f * x * x);
}
__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + __expf(-x)); }

template <typename T>
__global__ void gelu_fwd_kernel(View<T> x, View<T> y) {
  DOMINO_FOR_EACH(x.rows() * x.ncols) {
    const int64_t r = i / x.ncols, c = i % x.ncols;
    y.row(r)[c] = from_f<T>(gelu(to_f(x.row(r)[c])));
  }
}
template <typename T>
__global__ void gelu_bwd_kernel(View<T> x, View<T> dy, View<T> dx) {
  DOMINO_FOR_EACH(x.rows() * x.ncols) {
    const int64_t r = i / x.ncols, c = i % x.ncols;
    dx.row(r)[c] = from_f<T>(gelu_grad(to_f(x.row(r)[c])) * to_f(dy.row(r)[c]));
  }
}
template <typename T>
__global__ void swiglu_fwd_kernel(View<T> x, View<T> y) {
  const int64_t f = y.ncols;
  DOMINO_FOR_EACH(y.rows() * f) {
    const int64_t r = i / f, c = i % f;
    const float g = to_f(x.row(r)[c]), u = to_f(x.row(r)[f + c]);
    y.row(r)[c] = from_f<T>(g * sigmoid(g) * u);
  }
}
template <typename T>
__global__ void swiglu_bwd_kernel(View<T> x, View<T> dy, View<T> dx) {
  const int64_t f = dy.ncols;
  DOMINO_FOR_EACH(dy.rows() * f) {
    const int64_t r = i / f, c = i % f;
    const float g = to_f(x.row(r)[c]), u = to_f(x.row(r)[f + c]), d = to_f(dy.row(r)[c]);
    const float sg = sigmoid(g);
    dx.row(r)[c] = from_f<T>(d * u * sg * (1.f + g * (1.f - sg)));
    dx.row(r)[f + c] = from_f<T>(d * g * sg);
  }
}
template <typename T>
__global__ void relu_fwd_kernel(View<T> x, View<T> y) {
  DOMINO_FOR_EACH(x.rows() * x.ncols) {
    const int64_t r = i / x.ncols, c = i % x.ncols;
    y.row(r)[c] = from_f<T>(fmaxf(to_f(x.row(r)[c]), 0.f));
  }
}
// The gradient at 0 is 0 (PyTorch's choice, as the CPU).
template <typename T>
__global__ void relu_bwd_kernel(View<T> x, View<T> dy, View<T> dx) {
  DOMINO_FOR_EACH(x.rows() * x.ncols) {
    const int64_t r = i / x.ncols, c = i % x.ncols;
    dx.row(r)[c] = from_f<T>(to_f(x.row(r)[c]) > 0.f ? to_f(dy.row(r)[c]) : 0.f);
  }
}
template <typename T>
__global__ void geglu_fwd_kernel(View<T> x, View<T> y) {
  const int64_t f = y.ncols;
  DOMINO_FOR_EACH(y.rows() * f) {
    const int64_t r = i / f, c = i % f;
    y.row(r)[c] = from_f<T>(gelu(to_f(x.row(r)[c])) * to_f(x.row(r)[f + c]));
  }
}
// Reads gate and up before writing: dx may alias x, as for SwiGLU.
template <typename T>
__global__ void geglu_bwd_kernel(View<T> x, View<T> dy, View<T> dx) {
  const int64_t f = dy.ncols;
  DOMINO_FOR_EACH(dy.rows() * f) {
    const int64_t r = i / f, c = i % f;
    const float g = to_f(x.row(r)[c]), u = to_f(x.row(r)[f + c]), d = to_f(dy.row(r)[c]);
    dx.row(r)[c] = from_f<T>(d * u * gelu_grad(g));
    dx.row(r)[f + c] = from_f<T>(d * gelu(g));
  }
}
template <typename T>
__global__ void rope_kernel(View<T> x, int heads, int d, int rot, float sign) {
  const int half = rot / 2;  // partial rotary: the first rot columns of each head turn, the rest stay
  DOMINO_FOR_EACH(x.rows() * heads * half) {
    const int64_t r = i / (int64_t(heads) * half);
    const int hh = static_cast<int>((i / half) % heads), k = static_cast<int>(i % half);
    // In double as the CPU's table: a float angle is off by about pos * 6e-8 rad (1e-3 at 16k positions).
    const double theta = double(x.pos(r)) * pow(10000.0, -2.0 * k / rot);
    double snd, csd;
    sincos(theta, &snd, &csd);
    const float sn = float(snd) * sign, cs = float(csd);
    T* p = x.row(r) + int64_t(hh) * d;
    const float a = to_f(p[k]), b = to_f(p[k + half]);
    p[k] = from_f<T>(a * cs - b * sn);
    p[k + half] = from_f<T>(a * sn + b * cs);
  }
}
template <typename T>
__global__ void residual_kernel(View<T> a, View<T> b, View<T> bias, bool has_bias, View<T> out) {
  DOMINO_FOR_EACH(out.rows() * out.ncols) {
    const int64_t r = i / out.ncols, c = i % out.ncols;
    float v = to_f(a.row(r)[c]) + to_f(b.row(r)[c]);
    if (has_bias) v += to_f(bias.base[c]);
    out.row(r)[c] = from_f<T>(v);
  }
}
template <typename T>
__global__ void add_bias_kernel(View<T> out, View<T> bias) {
  DOMINO_FOR_EACH(out.rows() * out.ncols) {
    const int64_t r = i / out.ncols, c = i % out.ncols;
    out.row(r)[c] = from_f<T>(to_f(out.row(r)[c]) + to_f(bias.base[c]));
  }
}
template <typename T>
__global__ void colsum_kernel(View<T> dy, float* scratch, int64_t rows_per_band) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= dy.ncols) return;
  const int64_t r0 = blockIdx.y * rows_per_band, r1 = min(r0 + rows_per_band, dy.rows());
  float s = 0;
  for (int64_t r = r0; r < r1; ++r) s += to_f(dy.row(r)[c]);
  atomicAdd(&scratch[c], s);
}
template <typename T>
__global__ void store_colsum_kernel(const float* scratch, View<T> out, bool accumulate) {
  DOMINO_FOR_EACH(out.ncols) {
    out.base[i] = from_f<T>(scratch[i] + (accumulate ? to_f(out.base[i]) : 0.f));
  }
}
// Rows whose token lies outside this rank's vocabulary shard [first, first + width) get zeros.
template <typename T>
__global__ void embedding_fwd_kernel(View<float> tok, View<T> table, int64_t first, View<T> out) {
  DOMINO_FOR_EACH(out.rows() * out.ncols) {
    const int64_t r = i / out.ncols, c = i % out.ncols;
    const int64_t id = static_cast<int64_t>(tok.row(r)[0]) - first;
    const float v = id >= 0 && id < table.rows() ? to_f(table.base[id * table.row_stride + c]) : 0.f;
    out.row(r)[c] = from_f<T>(v);
  }
}
template <typename T>
__global__ void position_add_kernel(View<T> x, View<T> pos, View<T> out, RowPositions at) {
  DOMINO_FOR_EACH(out.rows() * out.ncols) {
    const int64_t r = i / out.ncols, c = i % out.ncols, t = x.pos(r);
    const int64_t p = at.part > 0 ? (t / at.part) * at.group_rows + at.rank * at.part + t % at.part : t;
    out.row(r)[c] = from_f<T>(to_f(x.row(r)[c]) + to_f(pos.base[p * pos.row_stride + c]));
  }
}
// Several rows may hold the same token: the scatter-add is atomic, into fp32 sums (A = float) for 16-bit
// gradients, which a frequent token would otherwise round at every addition.
// Only rows whose token lies in this rank's shard [first, first + table_rows) reach the table.
template <typename T, typename A>
__global__ void embedding_bwd_kernel(View<float> tok, View<T> dy, A* dtable, int64_t table_stride, int64_t first,
                                     int64_t table_rows, A* dpos, int64_t pos_stride, bool has_pos) {
  DOMINO_FOR_EACH(dy.rows() * dy.ncols) {
    const int64_t r = i / dy.ncols, c = i % dy.ncols;
    const int64_t id = static_cast<int64_t>(tok.row(r)[0]) - first;
    const T g = dy.row(r)[c];
    if (id >= 0 && id < table_rows) atomicAdd(&dtable[id * table_stride + c], A(to_f(g)));
    if (has_pos) atomicAdd(&dpos[dy.pos(r) * pos_stride + c], A(to_f(g)));
  }
}
// dst (+)= sums, both laid out with dst's row stride.
template <typename T>
__global__ void store_sums_kernel(const float* sums, View<T> dst, bool accumulate) {
  DOMINO_FOR_EACH(dst.rows() * dst.ncols) {
    const int64_t r = i / dst.ncols, c = i % dst.ncols;
    T* p = dst.row(r) + c;
    *p = from_f<T>(sums[r * dst.row_stride + c] + (accumulate ? to_f(*p) : 0.f));
  }
}
template <typename T>
__global__ void poison_kernel(View<T> v) {
  DOMINO_FOR_EACH(v.rows() * v.ncols) { v.row(i / v.ncols)[i % v.ncols] = from_f<T>(__int_as_float(0x7fc00000)); }
}
// A cheap integer hash of (index, seed) to a uniform value in [-1, 1): timing data that is neither zero nor
// constant (cuBLAS runs faster on zeros than on real values).
template <typename T>
__global__ void random_kernel(View<T> v, uint32_t seed) {
  DOMINO_FOR_EACH(v.rows() * v.ncols) {
    uint32_t h = uint32_t(i) * 0x9E3779B1u ^ (uint32_t(i >> 32) + seed) * 0x85EBCA77u;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    v.row(i / v.ncols)[i % v.ncols] = from_f<T>(float(h >> 8) * (2.f / 16777216.f) - 1.f);
  }
}
template <typename T>
__global__ void to_f32_kernel(View<T> v, float* dense) {
  DOMINO_FOR_EACH(v.rows() * v.ncols) { dense[i] = to_f(v.row(i / v.ncols)[i % v.ncols]); }
}
template <typename T>
__global__ void from_f32_kernel(const float* dense, View<T> v) {
  DOMINO_FOR_EACH(v.rows() * v.ncols) { v.row(i / v.ncols)[i % v.ncols] = from_f<T>(dense[i]); }
}
template <typename T>
__global__ void nonfinite_kernel(View<T> v, int* flag) {
  DOMINO_FOR_EACH(v.rows() * v.ncols) {
    if (!isfinite(to_f(v.row(i / v.ncols)[i % v.ncols]))) *flag = 1;
  }
}

}  // namespace

int elt_bytes(Elt e) { return e == Elt::F32 ? 4 : 2; }

void gelu_fwd(const DevView& x, const DevView& y, StreamHandle s) {
  DOMINO_DISPATCH_ELT(x.elt, gelu_fwd_kernel<T><<<grid_for(x.rows() * x.ncols), 256, 0, stream_of(s)>>>(view_of<T>(x), view_of<T>(y)));
  DOMINO_CUDA_LAUNCHED("gelu_fwd_kernel");
}
void gelu_bwd(const DevView& x, const DevView& dy, const DevView& dx, StreamHandle s) {
  DOMINO_DISPATCH_ELT(x.elt, gelu_bwd_kernel<T><<<grid_for(x.rows() * x.ncols), 256, 0, stream_of(s)>>>(view_of<T>(x), view_of<T>(dy), view_of<T>(dx)));
  DOMINO_CUDA_LAUNCHED("gelu_bwd_kernel");
}
void swiglu_fwd(const DevView& x, const DevView& y, StreamHandle s) {
  DOMINO_DISPATCH_ELT(x.elt, swiglu_fwd_kernel<T><<<grid_for(y.rows() * y.ncols), 256, 0, stream_of(s)>>>(view_of<T>(x), view_of<T>(y)));
  DOMINO_CUDA_LAUNCHED("swiglu_fwd_kernel");
}
void swiglu_bwd(const DevView& x, const DevView& dy, const DevView& dx, StreamHandle s) {
  DOMINO_DISPATCH_ELT(x.elt, swiglu_bwd_kernel<T><<<grid_for(dy.rows() * dy.ncols), 256, 0, stream_of(s)>>>(view_of<T>(x), view_of<T>(dy), view_of<T>(dx)));
  DOMINO_CUDA_LAUNCHED("swiglu_bwd_kernel");
}
void relu_fwd(const DevView& x, const DevView& y, StreamHandle s) {
  DOMINO_DISPATCH_ELT(x.elt, relu_fwd_kernel<T><<<grid_for(x.rows() * x.ncols), 256, 0, stream_of(s)>>>(view_of<T>(x), view_of<T>(y)));
  DOMINO_CUDA_LAUNCHED("relu_fwd_kernel");
}
void relu_bwd(const DevView& x, const DevView& dy, const DevView& dx, StreamHandle s) {
  DOMINO_DISPATCH_ELT(x.elt, relu_bwd_kernel<T><<<grid_for(x.rows() * x.ncols), 256, 0, stream_of(s)>>>(view_of<T>(x), view_of<T>(dy), view_of<T>(dx)));
  DOMINO_CUDA_LAUNCHED("relu_bwd_kernel");
}
void geglu_fwd(const DevView& x, const DevView& y, StreamHandle s) {
  DOMINO_DISPATCH_ELT(x.elt, geglu_fwd_kernel<T><<<grid_for(y.rows() * y.ncols), 256, 0, stream_of(s)>>>(view_of<T>(x), view_of<T>(y)));
  DOMINO_CUDA_LAUNCHED("geglu_fwd_kernel");
}
void geglu_bwd(const DevView& x, const DevView& dy, const DevView& dx, StreamHandle s) {
  DOMINO_DISPATCH_ELT(x.elt, geglu_bwd_kernel<T><<<grid_for(dy.rows() * dy.ncols), 256, 0, stream_of(s)>>>(view_of<T>(x), view_of<T>(dy), view_of<T>(dx)));
  DOMINO_CUDA_LAUNCHED("geglu_bwd_kernel");
}
void rope(const DevView& x, int heads, int head_dim, int rotary_dims, bool inverse, StreamHandle s) {
  const int rot = rotary_dims > 0 ? rotary_dims : head_dim;
  DOMINO_DISPATCH_ELT(x.elt, rope_kernel<T><<<grid_for(x.rows() * heads * (rot / 2)), 256, 0, stream_of(s)>>>(view_of<T>(x), heads, head_dim, rot, inverse ? -1.f : 1.f));
  DOMINO_CUDA_LAUNCHED("rope_kernel");
}
void residual_add(const DevView& a, const DevView& b, const DevView* bias, const DevView& out, StreamHandle s) {
  DOMINO_DISPATCH_ELT(out.elt, residual_kernel<T><<<grid_for(out.rows() * out.ncols), 256, 0, stream_of(s)>>>(view_of<T>(a), view_of<T>(b), bias ? view_of<T>(*bias) : view_of<T>(a), bias != nullptr, view_of<T>(out)));
  DOMINO_CUDA_LAUNCHED("residual_kernel");
}
void add_bias(const DevView& out, const DevView& bias, StreamHandle s) {
  DOMINO_DISPATCH_ELT(out.elt, add_bias_kernel<T><<<grid_for(out.rows() * out.ncols), 256, 0, stream_of(s)>>>(view_of<T>(out), view_of<T>(bias)));
  DOMINO_CUDA_LAUNCHED("add_bias_kernel");
}
void bias_grad(const DevView& dy, const DevView& dbias, bool accumulate, float* scratch, StreamHandle s) {
  DOMINO_CUDA_CHECK(cudaMemsetAsync(scratch, 0, sizeof(float) * dy.ncols, stream_of(s)));
  const int64_t band = 64;
  const dim3 grid(unsigned((dy.ncols + 255) / 256), unsigned((dy.rows() + band - 1) / band));
  DOMINO_DISPATCH_ELT(dy.elt, {
    colsum_kernel<T><<<grid, 256, 0, stream_of(s)>>>(view_of<T>(dy), scratch, band);
    store_colsum_kernel<T><<<grid_for(dy.ncols), 256, 0, stream_of(s)>>>(scratch, view_of<T>(dbias), accumulate);
  });
  DOMINO_CUDA_LAUNCHED("bias_grad");
}
void embedding_fwd(const EmbeddingFwdArgs& a, StreamHandle s) {
  const DevView &tokens = a.tokens, &table = a.table, &out = a.out;
  DOMINO_DISPATCH_ELT(out.elt, embedding_fwd_kernel<T><<<grid_for(out.rows() * out.ncols), 256, 0, stream_of(s)>>>(view_of<float>(tokens), view_of<T>(table), a.first, view_of<T>(out)));
  DOMINO_CUDA_LAUNCHED("embedding_fwd_kernel");
}
void position_add(const DevView& x, const DevView& pos, const DevView& out, const RowPositions& at, StreamHandle s) {
  DOMINO_DISPATCH_ELT(out.elt, position_add_kernel<T><<<grid_for(out.rows() * out.ncols), 256, 0, stream_of(s)>>>(view_of<T>(x), view_of<T>(pos), view_of<T>(out), at));
  DOMINO_CUDA_LAUNCHED("position_add_kernel");
}
void embedding_bwd(const EmbeddingBwdArgs& a, StreamHandle s) {
  const DevView &tokens = a.tokens, &dy = a.dy, &dtable = a.dtable, *dpos = a.dpos;
  const bool accumulate = a.accumulate;
  float* fp32_scratch = a.fp32_scratch;
  const int64_t table_n = dtable.rows() * dtable.row_stride, pos_n = dpos ? dpos->rows() * dpos->row_stride : 0;
  const unsigned grid = grid_for(dy.rows() * dy.ncols);
  const int64_t pos_stride = dpos ? dpos->row_stride : 0;
  if (dtable.elt == Elt::F32) {
    if (!accumulate)
      DOMINO_CUDA_CHECK(cudaMemsetAsync(dtable.base, 0, sizeof(float) * table_n, stream_of(s)));
    if (dpos && !a.accumulate_pos)
      DOMINO_CUDA_CHECK(cudaMemsetAsync(dpos->base, 0, sizeof(float) * pos_n, stream_of(s)));
    embedding_bwd_kernel<float, float><<<grid, 256, 0, stream_of(s)>>>(
        view_of<float>(tokens), view_of<float>(dy), static_cast<float*>(dtable.base), dtable.row_stride, a.first,
        dtable.rows(), dpos ? static_cast<float*>(dpos->base) : nullptr, pos_stride, dpos != nullptr);
    DOMINO_CUDA_LAUNCHED("embedding_bwd_kernel");
    return;
  }
  if (!fp32_scratch) throw_runtime("embedding_bwd: no fp32 scratch for a 16-bit embedding gradient");
  float* pos_sums = fp32_scratch + table_n;
  DOMINO_CUDA_CHECK(cudaMemsetAsync(fp32_scratch, 0, sizeof(float) * (table_n + pos_n), stream_of(s)));
  DOMINO_DISPATCH_ELT(dy.elt, {
    embedding_bwd_kernel<T, float><<<grid, 256, 0, stream_of(s)>>>(view_of<float>(tokens), view_of<T>(dy),
                                                                   fp32_scratch, dtable.row_stride, a.first,
                                                                   dtable.rows(), pos_sums, pos_stride,
                                                                   dpos != nullptr);
    store_sums_kernel<T><<<grid_for(dtable.rows() * dtable.ncols), 256, 0, stream_of(s)>>>(
        fp32_scratch, view_of<T>(dtable), accumulate);
    if (dpos) {
      store_sums_kernel<T><<<grid_for(dpos->rows() * dpos->ncols), 256, 0, stream_of(s)>>>(
          pos_sums, view_of<T>(*dpos), a.accumulate_pos);
    }
  });
  DOMINO_CUDA_LAUNCHED("embedding_bwd_kernel");
}
void poison(const DevView& v, StreamHandle s) {
  DOMINO_DISPATCH_ELT(v.elt, poison_kernel<T><<<grid_for(v.rows() * v.ncols), 256, 0, stream_of(s)>>>(view_of<T>(v)));
  DOMINO_CUDA_LAUNCHED("poison_kernel");
}
void fill_random(const DevView& v, uint32_t seed, StreamHandle s) {
  DOMINO_DISPATCH_ELT(v.elt, random_kernel<T><<<grid_for(v.rows() * v.ncols), 256, 0, stream_of(s)>>>(view_of<T>(v), seed));
  DOMINO_CUDA_LAUNCHED("random_kernel");
}
void view_to_f32(const DevView& v, float* dense, StreamHandle s) {
  DOMINO_DISPATCH_ELT(v.elt, to_f32_kernel<T><<<grid_for(v.rows() * v.ncols), 256, 0, stream_of(s)>>>(view_of<T>(v), dense));
  DOMINO_CUDA_LAUNCHED("to_f32_kernel");
}
void f32_to_view(const float* dense, const DevView& v, StreamHandle s) {
  DOMINO_DISPATCH_ELT(v.elt, from_f32_kernel<T><<<grid_for(v.rows() * v.ncols), 256, 0, stream_of(s)>>>(dense, view_of<T>(v)));
  DOMINO_CUDA_LAUNCHED("from_f32_kernel");
}
void find_nonfinite(const DevView& v, int* flag, StreamHandle s) {
  DOMINO_DISPATCH_ELT(v.elt, nonfinite_kernel<T><<<grid_for(v.rows() * v.ncols), 256, 0, stream_of(s)>>>(view_of<T>(v), flag));
  DOMINO_CUDA_LAUNCHED("nonfinite_kernel");
}

}  // namespace domino::cuda
