// files.cpp: atomic file writes shared by every tool that produces an output file, and the one way to make a temporary folder.
#include "sim/base/files.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "sim/base/error.hpp"

namespace domino {

std::string atomic_temp_path(const std::string& path, int pid) { return path + ".tmp." + std::to_string(pid); }

void write_file_atomic(const std::string& path, const std::string& contents) {
  const std::string tmp = atomic_temp_path(path, int(::getpid()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw_runtime("cannot write " + tmp);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw_runtime("failed writing " + tmp);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw_runtime("cannot rename " + tmp + " to " + path);
  }
}

TempDir::TempDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + prefix + ".XXXXXX";
  if (!::mkdtemp(pattern.data()))
    throw_runtime("cannot create a temporary folder " + pattern + ": " + std::strerror(errno));
  path_ = pattern;
}

TempDir::~TempDir() {
  if (keep_) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace domino
