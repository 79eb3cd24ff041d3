// cpu_backend.hpp: the CPU backend: fp32 buffers in one arena, Eigen math (executor/cpu), Gloo AllReduce.
#pragma once

#include <memory>

#include "executor/runtime/backend.hpp"

namespace domino {

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace domino
