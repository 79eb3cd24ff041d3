// progress.hpp: a one-line progress counter on stderr, shown only when stderr is a terminal and the
// work has already taken a while (so pipes, logs and short runs stay clean).
#pragma once

#include <chrono>
#include <string>

namespace domino {

class Progress {
 public:
  // enabled=false silences it entirely (tests, --quiet); it also stays silent when stderr is no terminal.
  explicit Progress(bool enabled);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void set_stage(const std::string& stage);  // "tp 8: pair costs"
  void tick(long done, long total);          // redraws at most ten times a second
  void finish();                             // clears the line if anything was drawn

 private:
  bool enabled_ = false;
  bool drawn_ = false;
  std::string stage_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace domino
