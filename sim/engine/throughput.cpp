// throughput.cpp: tokens per second per GPU and MFU from a predicted iteration time.
#include "sim/engine/throughput.hpp"

#include <limits>

namespace domino {

Throughput throughput(const ModelSpec& model, const Profile& profile, double iteration_us) {
  Throughput t;
  t.tokens_per_iteration = double(model.tokens());
  t.model_flops_per_iteration = derive_facts(model).train_flops_per_token * t.tokens_per_iteration;
  const double gpu_seconds = iteration_us * 1e-6 * double(model.tp);
  const auto& gemm = profile.gemm[size_t(model.dtype)];
  const double peak_flops = gemm ? gemm->peak_tflops * 1e12 : 0;
  t.tokens_per_s_per_gpu = gpu_seconds > 0 ? t.tokens_per_iteration / gpu_seconds : 0;
  t.mfu = gpu_seconds > 0 && peak_flops > 0 ? t.model_flops_per_iteration / (gpu_seconds * peak_flops)
                                            : std::numeric_limits<double>::quiet_NaN();
  return t;
}

}  // namespace domino
