// cuda_profile.hpp: the CUDA backend's part of domino-profile: times the workload's GEMMs through
// cuda::gemm (cuBLAS, as the backend runs them) and its memory-bound ops as device copies of the same
// byte counts, with CUDA events. Same JSON entries as the CPU measurement (rank_measure.hpp).
#pragma once

#include <nlohmann/json.hpp>

#include "executor/profiler/profile_workload.hpp"

namespace domino::cuda {

// Throws domino::Error (runtime) when no usable device is present.
nlohmann::json measure_compute(const prof::Workload& w, bool quick);

}  // namespace domino::cuda
