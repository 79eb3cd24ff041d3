// profile_lookup.cpp: finding a profile by name (profiles/NAME.yaml) and the default profile for a model.
#include <algorithm>
#include <filesystem>

#include "sim/cost/profile.hpp"
#include "sim/base/yaml_reader.hpp"

namespace domino {

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> profile_dirs() {
  std::vector<fs::path> dirs = {fs::path("profiles")};
#ifdef DOMINO_SOURCE_DIR
  dirs.push_back(fs::path(DOMINO_SOURCE_DIR) / "profiles");
#endif
  return dirs;
}

bool is_bare_name(const std::string& s) {
  return s.find('/') == std::string::npos && fs::path(s).extension() != ".yaml" && fs::path(s).extension() != ".yml";
}

}  // namespace

std::string resolve_profile_path(const std::string& path_or_name) {
  if (!is_bare_name(path_or_name)) return path_or_name;
  std::error_code ec;
  for (const auto& dir : profile_dirs()) {
    const fs::path candidate = dir / (path_or_name + ".yaml");
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
  }
  if (fs::is_regular_file(path_or_name, ec)) return path_or_name;
  std::vector<std::string> shipped;
  for (const auto& dir : profile_dirs()) {
    if (!fs::is_directory(dir, ec)) continue;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".yaml") shipped.push_back(e.path().stem().string());
    }
    if (!shipped.empty()) break;
  }
  std::sort(shipped.begin(), shipped.end());
  std::string list;
  for (const auto& s : shipped) list += (list.empty() ? "" : ", ") + s;
  const std::string near = closest_key(path_or_name, shipped);
  throw_bad_input("unknown profile '" + path_or_name + "': no file of that name and no profiles/" + path_or_name +
                  ".yaml" + (list.empty() ? "" : "; shipped profiles: " + list) +
                  (near.empty() ? "" : " (did you mean '" + near + "'?)"));
}

std::string default_profile_name(const ModelSpec& model) {
  if (model.dtype == DType::FP32 && derive_facts(model).total_params < 1'000'000'000) return "cpu-dev";
  return model.tp <= 8 ? "dgx-h100" : "h100-multinode";
}

}  // namespace domino
