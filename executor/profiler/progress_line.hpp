// progress_line.hpp: the measuring ranks' progress on stderr, only when stderr is a terminal (one line,
// overwritten), so that logs and pipes stay clean.
#pragma once

#include <string>

namespace domino::prof {

class Progress {
 public:
  explicit Progress(std::string prefix, bool enabled = true);
  void step(const std::string& what, int done, int total);
  void done();

 private:
  std::string prefix_;
  bool tty_ = false;
};

}  // namespace domino::prof
