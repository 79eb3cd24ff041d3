// backends.cpp: the backend registry (see backends.hpp).
#include "executor/job/backends.hpp"

#include <map>
#include <mutex>

#include "executor/cpu/cpu_backend.hpp"
#include "sim/base/error.hpp"

namespace domino {

namespace {
std::mutex registry_mutex;
std::map<std::string, BackendFactory>& registry() {
  static std::map<std::string, BackendFactory> r{{"cpu", [] { return make_cpu_backend(); }}};
  return r;
}
std::map<std::string, std::string>& missing() {
  static std::map<std::string, std::string> m;
  return m;
}
}  // namespace

void register_backend(const std::string& name, BackendFactory factory) {
  std::lock_guard lock(registry_mutex);
  missing().erase(name);
  registry()[name] = std::move(factory);
}

void register_missing_backend(const std::string& name, const std::string& why) {
  std::lock_guard lock(registry_mutex);
  if (!registry().count(name)) missing()[name] = why;
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
  if (auto m = missing().find(name); m != missing().end()) throw_bad_input("--backend " + name + ": " + m->second);
  std::string known;
  for (const auto& [n, f] : registry()) known += (known.empty() ? "" : ", ") + n;
  throw_bad_input("unknown backend '" + name + "' (known: " + known + ")");
}

}  // namespace domino
