// optimizer_state.cpp: what the parameters cost a rank in the training precision: the bytes each buffer
// holds (the memory estimate) and the bytes the optimizer step moves. 16-bit models train as Megatron-LM
// does by default (facts: What Megatron-LM runs by default): 16-bit parameters and gradients, fp32 master
// weights and fp32 moments. The master copies are not IR buffers: every backend keeps one beside each 16-bit
// Param buffer (the CUDA backend allocates them; the CPU backend runs fp32 models, which have none).
#include <algorithm>

#include "sim/ir/schedule_builder_internal.hpp"

namespace domino {
namespace {

bool has_master(const Schedule& s) { return s.model.dtype != DType::FP32; }

}  // namespace

namespace detail {

// fp32 models: every region once (gradient, parameter, each moment), the count the CPU profiles' optimizer
// bandwidth was measured with. 16-bit models: what the step moves, per parameter: the 16-bit gradient read,
// the fp32 master and each fp32 moment read and written, the 16-bit parameter written (Adam: 2 + 8 + 16 + 2 =
// 28 bytes). Under ZeRO-1 a rank steps only its 1/dp share of each parameter; the op's regions still name
// the whole buffer (the share is not a contiguous box of every buffer), so only its cost is scaled.
void cost_optimizer_step(const Schedule& s, Op& op) {
  const int shards = s.model.training.optimizer_shards();
  if (has_master(s)) {
    const double elements = double(op.out[0].elements());
    const double eb = dtype_bytes(s.model.dtype);
    const double moments = double(op.n_out - 1);
    op.bytes = elements * (eb + 2 * 4.0 + moments * 2 * 4.0 + eb);
  }
  op.bytes /= shards;
  op.flops /= shards;
}

}  // namespace detail

// Parameters and gradients in the model's dtype, optimizer states in fp32, and for 16-bit models an fp32
// master copy of every parameter. ZeRO-1 divides the fp32 master weights and the moments by dp (Megatron-LM's
// distributed optimizer: 4 + 12/dp bytes per parameter for a bf16 model with Adam). Gradients stay in the
// model's dtype, as the backends accumulate them (no fp32 gradient buffer).
int64_t schedule_memory_bytes(const Schedule& s) {
  const int eb = dtype_bytes(s.model.dtype);
  int64_t total = 0, sharded = 0;
  for (const BufferDesc& b : s.buffers) {
    if (b.role == BufferRole::OptState) {
      sharded += b.elements() * 4;
      continue;
    }
    total += b.elements() * eb;
    if (b.role == BufferRole::Param && has_master(s)) sharded += b.elements() * 4;
  }
  const int shards = s.model.training.optimizer_shards();
  return total + (sharded + shards - 1) / shards;
}

}  // namespace domino
