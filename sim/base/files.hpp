// files.hpp: how every tool writes an output file (never half-written) and makes a temporary folder.
#pragma once

#include <string>

namespace domino {

// Writes text to path through a temporary file in the same folder and a rename (never half-written).
void write_file_atomic(const std::string& path, const std::string& contents);

// The temporary file write_file_atomic(path, ...) writes first in process `pid`: "PATH.tmp.PID" (a launcher
// removes those of ranks that failed).
std::string atomic_temp_path(const std::string& path, int pid);

// A fresh, private folder under $TMPDIR (else /tmp), named PREFIX.XXXXXX; removed with everything in it
// when the object is destroyed. Runtime error when it cannot be made.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  void keep() { keep_ = true; }  // leave the folder behind (for debugging a run)

 private:
  std::string path_;
  bool keep_ = false;
};

}  // namespace domino
