// op_bench.cpp: buffers for a probe, laid out like the CPU backend's (64-byte aligned, row-major).
#include "executor/profiler/op_bench.hpp"

#include <cstdlib>
#include <random>

#include "executor/runtime/param_init.hpp"
#include "sim/base/error.hpp"

namespace domino::prof {

OpBench::OpBench(const Schedule& mini, uint64_t seed, int copies) : schedule_(mini) {
  check_cpu_schedule(mini);
  ctx_.schedule = &mini;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  for (int c = 0; c < std::max(1, copies); ++c) {
    std::vector<float*>& set = sets_.emplace_back();
    for (size_t i = 0; i < mini.buffers.size(); ++i) {
      const BufferDesc& b = mini.buffers[i];
      const size_t bytes = (size_t(b.elements()) * sizeof(float) + 63) / 64 * 64;
      float* p = static_cast<float*>(std::aligned_alloc(64, std::max<size_t>(bytes, 64)));
      if (!p) throw_runtime("profiler: cannot allocate " + std::to_string(bytes) + " bytes for " + b.name);
      owned_.push_back(p);
      initial_values(mini, int32_t(i), 0, seed, p);
      // Activations and gradients start as zeros in the executor; the kernels' speed must not depend on
      // zeros (or denormals), so give them realistic magnitudes.
      if (b.role == BufferRole::Activation || b.role == BufferRole::Grad || b.role == BufferRole::Workspace) {
        for (int64_t e = 0; e < b.elements(); ++e) p[e] = dist(rng);
      }
      set.push_back(p);
    }
  }
  ctx_.buffers = sets_.front();
}

OpBench::~OpBench() {
  for (float* p : owned_) std::free(p);
}

}  // namespace domino::prof
