// profile_meta.cpp: the provenance a measured profile records: machine, date, library versions, build flags.
#include "executor/profiler/profile_meta.hpp"

#include <fmt/format.h>
#include <gloo/config.h>
#include <unistd.h>

#include <Eigen/Core>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "executor/cpu/cpu_arena.hpp"

namespace domino::prof {

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown CPU";
}

std::string build_flags() {
  std::string f;
#ifdef __OPTIMIZE__
  f += "optimized";
#else
  f += "not optimized";
#endif
#ifdef NDEBUG
  f += ", NDEBUG";
#endif
#if defined(__AVX512F__)
  f += ", AVX-512 (-march=native)";
#elif defined(__AVX2__)
  f += ", AVX2";
#else
  f += ", no AVX (built without -march=native: GEMMs about 5x slower)";
#endif
#ifdef __FMA__
  f += ", FMA";
#endif
#ifdef DOMINO_HAVE_CUDA
  f += ", CUDA backend built";
#endif
  return f;
}

}  // namespace

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a.empty() ? "unknown" : a + " " + b + " " + c;
}

ProfileMetadata machine_metadata(const std::string& backend) {
  ProfileMetadata md;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  md.machine = fmt::format("{}: {}, {} cores; load average at the start {} ({} backend)", host, cpu_model(),
                           std::thread::hardware_concurrency(), load_average(), backend);
  if (backend == "cpu") md.machine += "; transparent huge pages: " + transparent_huge_page_mode();
  const std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  md.date = date;
  md.build_flags = build_flags();
  md.library_versions["eigen"] = fmt::format("{}.{}.{}", EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION);
  md.library_versions["gloo"] = fmt::format("{}.{}.{}", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH);
  md.library_versions["compiler"] = std::string("gcc ") + __VERSION__;
  md.library_versions["fmt"] = fmt::format("{}", FMT_VERSION);
  md.library_versions["nlohmann_json"] = fmt::format("{}.{}.{}", NLOHMANN_JSON_VERSION_MAJOR, NLOHMANN_JSON_VERSION_MINOR,
                                                     NLOHMANN_JSON_VERSION_PATCH);
  md.library_versions["domino"] = DOMINO_VERSION;
  return md;
}

}  // namespace domino::prof
