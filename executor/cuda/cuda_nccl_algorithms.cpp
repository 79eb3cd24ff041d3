// cuda_nccl_algorithms.cpp: see cuda_nccl_algorithms.hpp. The multicast attribute comes from the driver
// through the runtime's entry-point lookup, so the binaries keep loading on machines without a driver.
#include "executor/cuda/cuda_nccl_algorithms.hpp"

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdlib>

#include "sim/base/error.hpp"
#include "sim/cost/profile.hpp"  // kDefaultNvlsMinRanks

namespace domino::cuda {

namespace {

// What NCCL's CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED check says for `device` (NVLS needs it); false when
// the driver cannot be asked.
bool supports_multicast(int device) {
#if CUDART_VERSION >= 12050
  using GetAttribute = CUresult (*)(int*, CUdevice_attribute, CUdevice);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion("cuDeviceGetAttribute", &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || !fn)
    return false;
  int supported = 0;
  if (reinterpret_cast<GetAttribute>(fn)(&supported, CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, device) != CUDA_SUCCESS)
    return false;
  return supported != 0;
#else
  (void)device;
  return false;  // no by-version entry point before CUDA 12.5: NVLS is not measured
#endif
}

// NCCL_ALGO's spelling of a profile's algorithm name.
const char* nccl_name(const std::string& algorithm) {
  if (algorithm == "ring") return "Ring";
  if (algorithm == "nvls") return "NVLS";
  throw_bad_input("unknown collective algorithm '" + algorithm + "' (known: ring, nvls)");
}

}  // namespace

std::vector<std::string> nccl_forceable_algorithms(int world, int device) {
  std::vector<std::string> out = {"ring"};
  // NVLS runs inside one NVLink domain: a group spread over nodes (fewer local ranks than the world, as the
  // launcher says) would have no algorithm left under NCCL_ALGO=NVLS.
  const char* local = std::getenv("LOCAL_WORLD_SIZE");
  const bool one_node = !local || std::atoi(local) == world;
  if (one_node && world >= kDefaultNvlsMinRanks && supports_multicast(device)) out.push_back("nvls");
  return out;
}

ScopedNcclAlgorithm::ScopedNcclAlgorithm(const std::string& algorithm) {
  if (algorithm.empty()) return;
  const char* nccl = nccl_name(algorithm);
  if (const char* old = std::getenv("NCCL_ALGO")) previous_ = old;
  setenv("NCCL_ALGO", nccl, 1);
  set_ = true;
}

ScopedNcclAlgorithm::~ScopedNcclAlgorithm() {
  if (!set_) return;
  if (previous_) setenv("NCCL_ALGO", previous_->c_str(), 1);
  else unsetenv("NCCL_ALGO");
}

}  // namespace domino::cuda
