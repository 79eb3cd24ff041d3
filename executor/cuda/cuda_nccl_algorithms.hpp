// cuda_nccl_algorithms.hpp: which AllReduce algorithms NCCL can be forced to on this machine (ring always;
// NVLink SHARP where the devices support multicast and the group is large enough), and forcing one for
// the communicator about to be created (NCCL_ALGO, read by NCCL when a communicator is initialised).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace domino::cuda {

// Profile names ("ring", "nvls") NCCL can run an AllReduce of `world` ranks with, `device` being this
// rank's device: ring, and nvls when the device supports multicast (NVSwitch) and world reaches NCCL's
// NVLS floor (kDefaultNvlsMinRanks).
std::vector<std::string> nccl_forceable_algorithms(int world, int device);

// Sets NCCL_ALGO to the NCCL name of `algorithm` ("ring" -> Ring, "nvls" -> NVLS) for its lifetime and
// restores the previous value after; "" leaves the environment alone. BadInput for an unknown name.
class ScopedNcclAlgorithm {
 public:
  explicit ScopedNcclAlgorithm(const std::string& algorithm);
  ~ScopedNcclAlgorithm();
  ScopedNcclAlgorithm(const ScopedNcclAlgorithm&) = delete;
  ScopedNcclAlgorithm& operator=(const ScopedNcclAlgorithm&) = delete;

 private:
  bool set_ = false;
  std::optional<std::string> previous_;
};

}  // namespace domino::cuda
