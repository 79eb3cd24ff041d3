// backends.hpp: the backends domino-exec and domino-profile can run on, by name ("cpu" always; "cuda" once
// a main built with the CUDA backend registers it with its options).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "executor/runtime/backend.hpp"

namespace domino {

using BackendFactory = std::function<std::unique_ptr<Backend>()>;
void register_backend(const std::string& name, BackendFactory factory);
std::unique_ptr<Backend> make_backend(const std::string& name);  // BadInput naming the known backends
std::vector<std::string> backend_names();

}  // namespace domino
