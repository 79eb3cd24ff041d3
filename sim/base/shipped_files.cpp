// shipped_files.cpp: bare names -> shipped files (see shipped_files.hpp).
#include "sim/base/shipped_files.hpp"

#include <algorithm>
#include <filesystem>

#include "sim/base/error.hpp"
#include "sim/base/yaml_reader.hpp"

namespace domino {

namespace {

namespace fs = std::filesystem;

// The current directory's folder, then the source tree's (DOMINO_SOURCE_DIR is compiled into this file only).
std::vector<fs::path> search_dirs(const ShippedFolder& f) {
  std::vector<fs::path> dirs = {fs::path(f.folder)};
#ifdef DOMINO_SOURCE_DIR
  dirs.push_back(fs::path(DOMINO_SOURCE_DIR) / f.folder);
#endif
  return dirs;
}

std::vector<std::string> shipped_names(const ShippedFolder& f) {
  std::error_code ec;
  std::vector<std::string> shipped;
  for (const auto& dir : search_dirs(f)) {
    if (!fs::is_directory(dir, ec)) continue;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".yaml") shipped.push_back(e.path().stem().string());
    if (!shipped.empty()) break;
  }
  std::sort(shipped.begin(), shipped.end());
  return shipped;
}

}  // namespace

bool is_bare_name(const std::string& s, const ShippedFolder& folder) {
  if (s.find('/') != std::string::npos) return false;
  return std::none_of(folder.endings.begin(), folder.endings.end(), [&](const std::string& e) { return s.ends_with(e); });
}

std::string resolve_shipped(const std::string& path_or_name, const ShippedFolder& folder) {
  if (!is_bare_name(path_or_name, folder)) return path_or_name;
  std::error_code ec;
  for (const auto& dir : search_dirs(folder)) {
    const fs::path candidate = dir / (path_or_name + ".yaml");
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
  }
  const bool here = folder.folders_too ? fs::exists(path_or_name, ec) : fs::is_regular_file(path_or_name, ec);
  if (here) return path_or_name;
  const std::vector<std::string> shipped = shipped_names(folder);
  std::string list;
  for (const auto& s : shipped) list += (list.empty() ? "" : ", ") + s;
  const std::string near = closest_key(path_or_name, shipped);
  throw_bad_input("unknown " + folder.what + " '" + path_or_name + "': no file of that name and no " + folder.folder +
                  "/" + path_or_name + ".yaml" + (list.empty() ? "" : "; shipped " + folder.what + "s: " + list) +
                  (near.empty() ? "" : " (did you mean '" + near + "'?)"));
}

}  // namespace domino
