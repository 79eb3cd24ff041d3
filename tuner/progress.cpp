// progress.cpp: terminal-only progress line for long searches.
#include "tuner/progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace domino {
namespace {
constexpr auto kQuietFor = std::chrono::milliseconds(700);  // short searches print nothing
constexpr auto kRedrawEvery = std::chrono::milliseconds(100);
}  // namespace

Progress::Progress(bool enabled)
    : enabled_(enabled && isatty(STDERR_FILENO)), start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

Progress::~Progress() { finish(); }

void Progress::set_stage(const std::string& stage) { stage_ = stage; }

void Progress::tick(long done, long total) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - start_ < kQuietFor || now - last_draw_ < kRedrawEvery) return;
  last_draw_ = now;
  const double secs = std::chrono::duration<double>(now - start_).count();
  if (total > 0)
    std::fprintf(stderr, "\r\033[Kdomino-tune: %s %ld/~%ld simulations (%.1f s)", stage_.c_str(), done, total, secs);
  else
    std::fprintf(stderr, "\r\033[Kdomino-tune: %s %ld simulations (%.1f s)", stage_.c_str(), done, secs);
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::finish() {
  if (!drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace domino
