// cuda_op_dispatch.cpp: enqueues one IR op on a CUDA stream: cuBLAS for GEMMs and attention, our kernels
// for the rest, NCCL (or the emulated ring) for AllReduce. Semantics are those of sim/ir/schedule.hpp.
#include <nccl.h>

#include <string>

#include "executor/cuda/cuda_device_state.hpp"
#include "executor/cuda/cuda_gemm.hpp"
#include "executor/runtime/check.hpp"
#include "sim/ir/collective_traffic.hpp"
#include "sim/base/error.hpp"

namespace domino::cuda {
namespace {

ncclDataType_t nccl_type(Elt e) {
  switch (e) {
    case Elt::F32: return ncclFloat32;
    case Elt::BF16: return ncclBfloat16;
    case Elt::F16: return ncclFloat16;
  }
  return ncclFloat32;
}

void all_reduce(DeviceState& dev, const Op& op, cudaStream_t s) {
  const DevView v = dev.view(op.out[0]);
  const int64_t count = v.rows() * v.ncols;
  const int64_t bytes = count * elt_bytes(v.elt);
  if (dev.options.emulate_comm) {
    const auto traffic = int64_t(ring_allreduce_traffic(double(bytes), dev.options.emulate_tp));
    const double bytes_per_us = dev.options.emulate_busbw_gbps * 1e3;  // GB/s -> bytes/us
    emulated_allreduce(v.base, bytes, traffic, dev.options.emulate_sms, bytes_per_us, dev.options.emulate_latency_us,
                       dev.clock_ghz, s);
    return;
  }
  if (dev.world <= 1) return;  // a single rank: the sum over one rank is the buffer itself
  std::lock_guard<std::timed_mutex> lock(dev.nccl_mutex);  // the other stream thread polls the communicator
  void* comm = dev.nccl.load();
  if (!comm) {
    throw_runtime("rank " + std::to_string(dev.rank) + ": op " + op_id(op) + ": the NCCL communicator was aborted (" +
                  dev.abort_reason() + ")");
  }
  DOMINO_NCCL_CHECK(ncclAllReduce(v.base, v.base, size_t(count), nccl_type(v.elt), ncclSum,
                                  static_cast<ncclComm_t>(comm), s));
}

}  // namespace

void run_op(DeviceState& dev, const Op& op, Stream stream) {
  cudaStream_t s = dev.stream(stream);
  void* h = dev.cublas[static_cast<int>(stream)];
  auto in = [&](int i) { return dev.view(op.in[i]); };
  auto out = [&](int i) { return dev.view(op.out[i]); };
  const bool acc = op.attrs.accumulate;
  switch (op.code) {
    case OpCode::MatMul:
      matmul(h, in(0), in(1), out(0), acc);
      if (op.n_in > 2) add_bias(out(0), in(2), s);
      break;
    case OpCode::MatMulDgrad:
      matmul_dgrad(h, in(0), in(1), out(0), acc);
      break;
    case OpCode::MatMulWgrad:
      matmul_wgrad(h, in(0), in(1), out(0), acc);
      if (op.n_out > 1) bias_grad(in(1), out(1), acc, dev.reduce_scratch, s);
      break;
    case OpCode::LayerNormFwd:
    case OpCode::RmsNormFwd: {
      const bool rms = op.code == OpCode::RmsNormFwd;
      const DevView beta = rms ? DevView{} : in(2);
      norm_fwd(in(0), in(1), rms ? nullptr : &beta, out(0), out(1), op.attrs.eps, rms, s);
      break;
    }
    case OpCode::LayerNormBwd:
    case OpCode::RmsNormBwd: {
      const bool rms = op.code == OpCode::RmsNormBwd;
      DevView dy[kMaxIn];
      const int chunks = op.attrs.chunks;
      for (int c = 0; c < chunks; ++c) dy[c] = in(3 + c);
      const DevView dbeta = rms ? DevView{} : out(2);
      norm_bwd(in(0), in(1), in(2), dy, chunks, out(0), acc, out(1), rms ? nullptr : &dbeta,
               op.attrs.accumulate_params, rms, dev.reduce_scratch, s);
      break;
    }
    case OpCode::GeluFwd: gelu_fwd(in(0), out(0), s); break;
    case OpCode::GeluBwd: gelu_bwd(in(0), in(1), out(0), s); break;
    case OpCode::SwigluFwd: swiglu_fwd(in(0), out(0), s); break;
    case OpCode::SwigluBwd: swiglu_bwd(in(0), in(1), out(0), s); break;
    case OpCode::RopeFwd:
    case OpCode::RopeBwd:
      rope(out(0), op.attrs.heads, op.attrs.head_dim, op.code == OpCode::RopeBwd, s);
      break;
    case OpCode::AttnFwd:
    case OpCode::AttnBwd: {
      const BufferDesc& probs = dev.schedule->buffers[op.code == OpCode::AttnFwd ? op.out[1].buffer : op.in[3].buffer];
      AttnShape a{op.attrs.heads, op.attrs.kv_heads, op.attrs.head_dim, probs.cols / op.attrs.heads};
      if (op.code == OpCode::AttnFwd)
        attention_fwd(h, s, in(0), in(1), in(2), out(1), out(0), a);
      else
        attention_bwd(h, s, in(0), in(1), in(2), in(3), in(4), out(0), out(1), out(2), acc, a, dev.attn_scratch);
      break;
    }
    case OpCode::ResidualAdd: {
      const DevView bias = op.n_in > 2 ? in(2) : DevView{};
      residual_add(in(0), in(1), op.n_in > 2 ? &bias : nullptr, out(0), s);
      break;
    }
    case OpCode::EmbeddingFwd: {
      const DevView pos = op.n_in > 2 ? in(2) : DevView{};
      embedding_fwd(in(0), in(1), op.n_in > 2 ? &pos : nullptr, out(0), s);
      break;
    }
    case OpCode::EmbeddingBwd: {
      const DevView dpos = op.n_out > 1 ? out(1) : DevView{};
      embedding_bwd(in(0), in(1), out(0), op.n_out > 1 ? &dpos : nullptr, acc, dev.embed_scratch, s);
      break;
    }
    case OpCode::CrossEntropy: {
      // Averaged over every token of the logits buffer (a sliced op holds only part of them), as the CPU.
      const BufferDesc& b = dev.schedule->buffers[op.in[0].buffer];
      cross_entropy(in(0), in(1), out(0), out(1), double(b.batch * b.seq), acc, dev.reduce_scratch, s);
      break;
    }
    case OpCode::AllReduce: all_reduce(dev, op, s); break;
    case OpCode::AdamStep:
    case OpCode::SgdStep: {
      const int32_t p = op.out[0].buffer;
      const int64_t n = dev.schedule->buffers[p].elements();
      const OptimizerHyper& o = dev.hyper;
      if (op.code == OpCode::AdamStep)
        adam_step(in(0), out(0), dev.master[p], static_cast<float*>(dev.ptr[op.out[1].buffer]),
                  static_cast<float*>(dev.ptr[op.out[2].buffer]), n, o.lr, o.beta1, o.beta2, o.eps, o.weight_decay,
                  dev.step, s);
      else
        sgd_step(in(0), out(0), dev.master[p], static_cast<float*>(dev.ptr[op.out[1].buffer]), n, o.lr, o.momentum,
                 o.weight_decay, s);
      break;
    }
  }
}

}  // namespace domino::cuda
