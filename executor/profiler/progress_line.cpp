// progress_line.cpp: the measuring ranks' progress line (see progress_line.hpp).
#include "executor/profiler/progress_line.hpp"

#include <unistd.h>

#include <cstdio>

namespace domino::prof {

Progress::Progress(std::string prefix, bool enabled)
    : prefix_(std::move(prefix)), enabled_(enabled), tty_(enabled && ::isatty(2) == 1) {}

void Progress::step(const std::string& stage, const std::string& what, int done, int total) {
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s %s %s [%d/%d]", prefix_.c_str(), stage.c_str(), what.c_str(), done,
                 total);
    std::fflush(stderr);
    return;
  }
  if (!enabled_ || stage == stage_) return;
  stage_ = stage;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(stderr, "%s %s from probe %d of %d, %.0f s in\n", prefix_.c_str(), stage.c_str(), done, total,
               secs);
  std::fflush(stderr);
}

void Progress::done() {
  if (!tty_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

}  // namespace domino::prof
