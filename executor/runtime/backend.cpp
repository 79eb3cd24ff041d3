// backend.cpp: the backend registry and the backend-independent helpers of backend.hpp.
#include "executor/runtime/backend.hpp"

#include <cmath>
#include <map>
#include <mutex>

#include "executor/runtime/cpu_backend.hpp"
#include "sim/error.hpp"

namespace domino {

bool Backend::region_finite(const Region& region) {
  for (float v : read_region(region))
    if (!std::isfinite(v)) return false;
  return true;
}

std::vector<float> Backend::read_buffer(const Schedule& schedule, int32_t buffer) {
  return read_region(whole_buffer(schedule, buffer));
}

Region whole_buffer(const Schedule& schedule, int32_t buffer) {
  const BufferDesc& b = schedule.buffers.at(buffer);
  Region r;
  r.buffer = buffer;
  r.b1 = b.batch;
  r.s1 = b.seq;
  r.c1 = b.cols;
  return r;
}

namespace {
std::mutex registry_mutex;
std::map<std::string, BackendFactory>& registry() {
  static std::map<std::string, BackendFactory> r{{"cpu", [] { return make_cpu_backend(); }}};
  return r;
}
}  // namespace

void register_backend(const std::string& name, BackendFactory factory) {
  std::lock_guard lock(registry_mutex);
  registry()[name] = std::move(factory);
}

std::vector<std::string> backend_names() {
  std::lock_guard lock(registry_mutex);
  std::vector<std::string> names;
  for (const auto& [name, factory] : registry()) names.push_back(name);
  return names;
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
  std::lock_guard lock(registry_mutex);
  auto it = registry().find(name);
  if (it != registry().end()) return it->second();
  if (name == "cuda")
    throw_bad_input("--backend cuda: this domino-exec was built without the CUDA backend "
                    "(configure with -DDOMINO_CUDA=ON on a machine with the CUDA toolkit)");
  std::string known;
  for (const auto& [n, f] : registry()) known += (known.empty() ? "" : ", ") + n;
  throw_bad_input("unknown backend '" + name + "' (known: " + known + ")");
}

}  // namespace domino
