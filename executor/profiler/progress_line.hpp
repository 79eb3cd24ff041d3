// progress_line.hpp: the measuring ranks' progress on stderr. On a terminal one line, overwritten per probe;
// in a log (stderr not a terminal) one line per stage ("gemm", "memory-bound", "allreduce", ...) with the
// seconds since the start, so that a slow or stopped run shows where its time went.
#pragma once

#include <chrono>
#include <string>

namespace domino::prof {

class Progress {
 public:
  explicit Progress(std::string prefix, bool enabled = true);
  void step(const std::string& stage, const std::string& what, int done, int total);
  void done();

 private:
  std::string prefix_;
  bool enabled_ = false;
  bool tty_ = false;
  std::string stage_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace domino::prof
