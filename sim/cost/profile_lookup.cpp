// profile_lookup.cpp: finding a profile by name (profiles/NAME.yaml) and the default profile for a model.
#include "sim/cost/profile.hpp"
#include "sim/base/shipped_files.hpp"

namespace domino {

std::string resolve_profile_path(const std::string& path_or_name) {
  static const ShippedFolder kProfiles{"profile", "profiles", {".yaml", ".yml"}, false};
  return resolve_shipped(path_or_name, kProfiles);
}

std::string default_profile_name(const ModelSpec& model) {
  if (model.dtype == DType::FP32 && derive_facts(model).total_params < 1'000'000'000) return "cpu-dev";
  return model.tp <= 8 ? "dgx-h100" : "h100-multinode";
}

}  // namespace domino
