// cuda_ops_test.cpp: every op of real schedules (GPT and Llama layers, sliced plans) run on the GPU
// against the CPU backend's result on identical inputs. Outputs are poisoned with NaN before each run
// (NaN never passes); each op starts from the CPU's state so errors do not compound. Also the values
// prepare() starts a run from, and a profiler probe's. Skips without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "executor/cpu/cpu_ops.hpp"
#include "executor/cuda/cuda_backend.hpp"
#include "executor/cuda/cuda_device_state.hpp"
#include "executor/cuda/cuda_kernels.hpp"
#include "executor/runtime/check.hpp"
#include "executor/runtime/param_init.hpp"
#include "sim/ir/schedule.hpp"
#include "sim/ir/verify.hpp"
#include "sim/model/plan.hpp"

namespace domino {
namespace {

ModelSpec tiny_model(Family family, DType dtype) {
  ModelSpec m;
  m.name = "tiny";
  m.family = family;
  m.layers = 2;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = family == Family::Llama ? 2 : 4;
  m.ffn_hidden = family == Family::Llama ? 96 : 256;
  m.activation = family == Family::Llama ? Activation::Swiglu : Activation::Gelu;
  m.norm = family == Family::Llama ? NormKind::RmsNorm : NormKind::LayerNorm;
  m.set_biases(family == Family::Gpt);
  m.vocab = 128;
  m.seq_len = 32;
  m.micro_batch = 4;
  m.dtype = dtype;
  m.tp = 1;
  return m;
}

// Dense fp32 copy of a region from host buffers.
std::vector<float> read_host(const Schedule& s, const std::vector<std::vector<float>>& bufs, const Region& r) {
  const BufferDesc& d = s.buffers[r.buffer];
  std::vector<float> out;
  out.reserve(size_t(r.elements()));
  for (int64_t b = r.b0; b < r.b1; ++b)
    for (int64_t q = r.s0; q < r.s1; ++q)
      for (int64_t c = r.c0; c < r.c1; ++c) out.push_back(bufs[r.buffer][size_t((b * d.seq + q) * d.cols + c)]);
  return out;
}

double rel_error(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// Whether output i is also one of the op's inputs (PositionAdd adds to x0 in place, rope turns Q and K in
// place): poisoning it would poison the input.
bool output_is_read(const Op& op, int i) {
  const Region& o = op.out[i];
  for (int j = 0; j < op.n_in; ++j) {
    const Region& r = op.in[j];
    if (r.buffer == o.buffer && r.b0 < o.b1 && o.b0 < r.b1 && r.s0 < o.s1 && o.s0 < r.s1 && r.c0 < o.c1 &&
        o.c0 < r.c1)
      return true;
  }
  return false;
}

// `rank`: the rank of the TP group both sides play (its vocabulary shard; AllReduces are skipped, so the
// values are that rank's own, the same on both sides).
void check_schedule_on_gpu(const ModelSpec& model, const Plan& plan, double tolerance, int rank = 0) {
  const Schedule s = build_schedule(model, plan);
  verify_schedule(s);  // run_op is called directly below, without the rank runner that verifies
  std::vector<std::vector<float>> host(s.buffers.size());
  for (size_t b = 0; b < s.buffers.size(); ++b) {
    host[b].resize(size_t(s.buffers[b].elements()));
    initial_values(s, int32_t(b), rank, 7, host[b].data());
  }
  CpuOpContext cpu;
  cpu.schedule = &s;
  cpu.rank = rank;
  for (auto& b : host) cpu.buffers.push_back(b.data());

  cuda::DeviceState dev;
  dev.rank = rank;
  struct Release {  // device memory goes back even when an assertion or a CUDA error ends the test
    cuda::DeviceState& d;
    ~Release() { d.release(); }
  } release{dev};
  dev.options.dtype = "model";
  dev.allocate(s);
  for (size_t b = 0; b < s.buffers.size(); ++b) dev.upload(int32_t(b), host[b]);
  for (const Op& op : s.ops) {
    if (op.code == OpCode::AllReduce) continue;  // one rank: nothing to sum
    // The GPU starts from the CPU's state, then outputs are poisoned: two passes, because outputs may be
    // regions of one buffer (dQ, dK, dV) and uploading a whole buffer would undo an earlier poisoning.
    for (int i = 0; i < op.n_in; ++i) dev.upload(op.in[i].buffer, host[op.in[i].buffer]);
    for (int i = 0; i < op.n_out; ++i) dev.upload(op.out[i].buffer, host[op.out[i].buffer]);
    for (int i = 0; i < op.n_out; ++i) {
      const bool keeps_old = output_is_read(op, i) || op.attrs.accumulate || op.code == OpCode::AdamStep ||
                             op.code == OpCode::SgdStep || (i > 0 && op.attrs.accumulate_params);
      if (!keeps_old) cuda::poison(dev.view(op.out[i]), dev.stream(Stream::Compute));
    }
    cuda::run_op(dev, op, Stream::Compute);
    run_cpu_op(op, cpu);
    for (int i = 0; i < op.n_out; ++i) {
      const double err = rel_error(dev.download(op.out[i]), read_host(s, host, op.out[i]));
      EXPECT_LE(err, tolerance) << op_id(op) << " output " << i;
    }
  }
}

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (cuda_device_count(&why) == 0) GTEST_SKIP() << "no CUDA device here (" << why << "): GPU tests skipped";
  }
};

TEST_F(CudaOps, RandomFillIsBoundedVariedAndCoversEveryElement) {
  const int64_t rows = 301, cols = 97;  // odd sizes: the grid-stride loop's tail
  float *bf = nullptr, *dense = nullptr;
  DOMINO_CUDA_CHECK(cudaMalloc(&bf, size_t(rows * cols) * 2));
  DOMINO_CUDA_CHECK(cudaMalloc(&dense, size_t(rows * cols) * sizeof(float)));
  const cuda::DevView v = cuda::dense_view(bf, cuda::Elt::BF16, rows, cols);
  cuda::poison(v, nullptr);
  cuda::fill_random(v, 3, nullptr);
  cuda::view_to_f32(v, dense, nullptr);
  std::vector<float> got(size_t(rows * cols));
  DOMINO_CUDA_CHECK(cudaMemcpy(got.data(), dense, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
  DOMINO_CUDA_CHECK(cudaFree(bf));
  DOMINO_CUDA_CHECK(cudaFree(dense));
  double sum = 0;
  for (float x : got) {
    ASSERT_TRUE(x >= -1.f && x <= 1.f) << x;  // NaN (a poisoned element left unwritten) fails too
    sum += x;
  }
  EXPECT_LT(std::abs(sum / double(got.size())), 0.05);
  const auto [lo, hi] = std::minmax_element(got.begin(), got.end());
  EXPECT_LT(*lo, -0.9f);
  EXPECT_GT(*hi, 0.9f);
}

TEST_F(CudaOps, GptFp32MegatronMatchesCpu) {
  const ModelSpec m = tiny_model(Family::Gpt, DType::FP32);
  check_schedule_on_gpu(m, make_strategy_plan("megatron-sync", m), 1e-4);
}

TEST_F(CudaOps, LlamaFp32SlicedMatchesCpu) {
  const ModelSpec m = tiny_model(Family::Llama, DType::FP32);
  BlockPlan seq{SplitDim::Sequence, 4, 2, OverlapMode::Inter, true};
  BlockPlan batch{SplitDim::Batch, 2, 2, OverlapMode::Intra, true};
  check_schedule_on_gpu(m, make_uniform_plan(m, seq, batch, "custom"), 1e-4);
}

// The last rank's vocabulary shard, padded (130 ids over 4 ranks: 33 each, 2 of padding): the embedding,
// the head's loss statistics and the cross-entropy see the same shard on both sides.
TEST_F(CudaOps, GptFp32LastVocabShardMatchesCpu) {
  ModelSpec m = tiny_model(Family::Gpt, DType::FP32);
  m.tp = 4, m.vocab = 130;
  check_schedule_on_gpu(m, make_strategy_plan("megatron-async", m), 1e-4, 3);
}

TEST_F(CudaOps, LlamaBf16VocabShardMatchesCpuWithinBf16Error) {
  ModelSpec m = tiny_model(Family::Llama, DType::BF16);
  m.tp = 2;
  check_schedule_on_gpu(m, make_strategy_plan("megatron-sync", m), 3e-2, 1);
}

TEST_F(CudaOps, LlamaFp16SlicedMatchesCpuWithinFp16Error) {
  const ModelSpec m = tiny_model(Family::Llama, DType::FP16);
  BlockPlan b{SplitDim::Sequence, 2, 2, OverlapMode::Inter, true};
  check_schedule_on_gpu(m, make_uniform_plan(m, b, b, "custom"), 1e-2);
}

// ReLU and GeGLU kernels, and the tied head: logits from the embedding's shard, its weight gradient added to
// by the embedding's backward (fp32 sums for the 16-bit table).
TEST_F(CudaOps, GptFp32ReluTiedMatchesCpu) {
  ModelSpec m = tiny_model(Family::Gpt, DType::FP32);
  m.activation = Activation::Relu, m.tied_embeddings = true;
  check_schedule_on_gpu(m, make_strategy_plan("megatron-sync", m), 1e-4);
}

TEST_F(CudaOps, LlamaBf16GegluTiedMatchesCpuWithinBf16Error) {
  ModelSpec m = tiny_model(Family::Llama, DType::BF16);
  m.activation = Activation::Geglu, m.tied_embeddings = true, m.tp = 2;
  check_schedule_on_gpu(m, make_strategy_plan("megatron-sync", m), 3e-2, 1);
}

// The emulated collective lasts at least its latency plus its traffic over the bus bandwidth (it spins on
// the SM clock up to that time: a lower bound whatever the GPU's load, not a speed claim).
TEST_F(CudaOps, EmulatedAllReduceLastsAtLeastItsModelledTime) {
  const int64_t bytes = int64_t(8) << 20;
  void* buf = nullptr;
  DOMINO_CUDA_CHECK(cudaMalloc(&buf, size_t(bytes)));
  int clock_khz = 0;
  DOMINO_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  cudaEvent_t t0, t1;
  DOMINO_CUDA_CHECK(cudaEventCreate(&t0));
  DOMINO_CUDA_CHECK(cudaEventCreate(&t1));
  const int64_t traffic = bytes * 2 * 7 / 8;  // ring of 8
  const double bytes_per_us = 50e3, latency_us = 300;  // 50 GB/s: 294 us of traffic
  float ms = 0;
  for (int rep = 0; rep < 2; ++rep) {  // the first launch also loads the module
    DOMINO_CUDA_CHECK(cudaEventRecord(t0));
    cuda::emulated_collective({.buffer = buf,
                               .buffer_bytes = bytes,
                               .traffic_bytes = traffic,
                               .sms = 16,
                               .bytes_per_us = bytes_per_us,
                               .latency_us = latency_us,
                               .clock_ghz = clock_khz / 1e6},
                              nullptr);
    DOMINO_CUDA_CHECK(cudaEventRecord(t1));
    DOMINO_CUDA_CHECK(cudaEventSynchronize(t1));
    DOMINO_CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
  }
  DOMINO_CUDA_CHECK(cudaEventDestroy(t0));
  DOMINO_CUDA_CHECK(cudaEventDestroy(t1));
  DOMINO_CUDA_CHECK(cudaFree(buf));
  EXPECT_GE(ms * 1e3, 0.95 * (latency_us + double(traffic) / bytes_per_us));
}

TEST_F(CudaOps, GptBf16SlicedMatchesCpuWithinBf16Error) {
  const ModelSpec m = tiny_model(Family::Gpt, DType::BF16);
  BlockPlan b{SplitDim::Batch, 2, 1, OverlapMode::Inter, true};
  check_schedule_on_gpu(m, make_uniform_plan(m, b, b, "custom"), 3e-2);
}

// Every buffer as prepare() left it, against initial_values: zero-start buffers are cleared on the device,
// the rest uploaded, and a training run must see exactly what the CPU backend starts from.
TEST_F(CudaOps, PrepareStartsFromTheCpuInitialValues) {
  const ModelSpec m = tiny_model(Family::Gpt, DType::FP32);
  const Schedule s = build_schedule(m, make_strategy_plan("domino-ds", m));
  CudaOptions o;
  o.dtype = "fp32";
  std::unique_ptr<Backend> cuda = make_cuda_backend(o);
  cuda->prepare(s, RankContext{});
  int zero_start = 0;
  for (int32_t b = 0; b < int32_t(s.buffers.size()); ++b) {
    const BufferDesc& d = s.buffers[size_t(b)];
    std::vector<float> want(size_t(d.elements()));
    initial_values(s, b, 0, RankContext{}.seed, want.data());
    EXPECT_EQ(cuda->read_region(Region{b, 0, d.batch, 0, d.seq, 0, d.cols}), want) << d.name;
    zero_start += starts_at_zero(s, b);
  }
  EXPECT_GT(zero_start, 0) << "the schedule has activations and gradients that start at zero";
}

// A profiler probe (reproducible_values false): parameters drawn on the device, varied and inside [-1, 1];
// everything else as on the CPU.
TEST_F(CudaOps, ProbeParametersAreDrawnOnTheDevice) {
  const ModelSpec m = tiny_model(Family::Gpt, DType::FP32);
  const Schedule s = build_schedule(m, make_strategy_plan("megatron-sync", m));
  std::unique_ptr<Backend> cuda = make_cuda_backend(CudaOptions{});
  RankContext ctx;
  ctx.reproducible_values = false;
  cuda->prepare(s, ctx);
  for (int32_t b = 0; b < int32_t(s.buffers.size()); ++b) {
    const BufferDesc& d = s.buffers[size_t(b)];
    const std::vector<float> got = cuda->read_region(Region{b, 0, d.batch, 0, d.seq, 0, d.cols});
    if (d.role != BufferRole::Param) {
      std::vector<float> want(got.size());
      initial_values(s, b, 0, ctx.seed, want.data());
      EXPECT_EQ(got, want) << d.name;
      continue;
    }
    const auto [lo, hi] = std::minmax_element(got.begin(), got.end());
    EXPECT_TRUE(*lo >= -1.f && *hi <= 1.f) << d.name;  // NaN fails too
    if (got.size() > 16) {
      EXPECT_LT(*lo, *hi) << d.name << " is not varied";
    }
  }
}

// --cuda-comm-priority: the communication stream at the device's highest priority by default, at the compute
// stream's with normal.
TEST_F(CudaOps, TheCommunicationStreamRunsAtTheChosenPriority) {
  const ModelSpec m = tiny_model(Family::Gpt, DType::FP32);
  const Schedule s = build_schedule(m, make_strategy_plan("domino-ds", m));
  int least = 0, greatest = 0;
  DOMINO_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  for (const bool high : {true, false}) {
    cuda::DeviceState dev;
    dev.options.comm_high_priority = high;
    dev.allocate(s);
    int comm = 0, compute = 0;
    DOMINO_CUDA_CHECK(cudaStreamGetPriority(dev.stream(Stream::Comm), &comm));
    DOMINO_CUDA_CHECK(cudaStreamGetPriority(dev.stream(Stream::Compute), &compute));
    dev.release();
    EXPECT_EQ(comm, high ? greatest : least) << (high ? "high" : "normal");
    EXPECT_EQ(compute, least);
  }
}

}  // namespace
}  // namespace domino
