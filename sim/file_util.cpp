// file_util.cpp: atomic file writes shared by every tool that produces an output file.
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "sim/error.hpp"
#include "sim/timeline.hpp"

namespace domino {

void write_file_atomic(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
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

}  // namespace domino
