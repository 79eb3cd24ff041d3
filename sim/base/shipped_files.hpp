// shipped_files.hpp: finding a shipped input (a model under configs/models, a profile under profiles) by its
// bare name, first below the current directory, then in the checkout the tools were built from.
#pragma once

#include <string>
#include <vector>

namespace domino {

struct ShippedFolder {
  std::string what;                  // "model", "profile": for messages
  std::string folder;                // relative to a checkout: "configs/models", "profiles"
  std::vector<std::string> endings;  // a name with one of these endings (or a '/') is a path, not a name
  bool folders_too = false;          // a bare name that is a folder here counts as a path (HF checkpoints)
};

// True when `s` is a bare name (no '/', none of the folder's file endings).
bool is_bare_name(const std::string& s, const ShippedFolder& folder);

// A path is returned as it is; a bare name resolves to FOLDER/NAME.yaml, else to a file of that name here.
// BadInput listing the shipped names (and the closest one) when nothing matches.
std::string resolve_shipped(const std::string& path_or_name, const ShippedFolder& folder);

}  // namespace domino
