// backends.hpp: the backends domino-exec can run on, by name ("cpu" always; others once a main built with
// them registers them: the CUDA backend declares its own flags and hands over its factory, see
// executor/cuda/cuda_backend.hpp). A backend this build lacks can be registered as missing, with a hint.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "executor/runtime/backend.hpp"

namespace domino {

using BackendFactory = std::function<std::unique_ptr<Backend>()>;
void register_backend(const std::string& name, BackendFactory factory);
// make_backend(name) then fails with BadInput "--backend NAME: <why>" (e.g. how to build it).
void register_missing_backend(const std::string& name, const std::string& why);
std::unique_ptr<Backend> make_backend(const std::string& name);  // BadInput naming the known backends
std::vector<std::string> backend_names();
// The command-line option group that holds a backend's own flags ("cuda backend").
inline std::string backend_flag_group(const std::string& name) { return name + " backend"; }

}  // namespace domino
