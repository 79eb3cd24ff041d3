// error.hpp: the one exception type every library throws; main() maps its kind to the exit code.
#pragma once

#include <stdexcept>
#include <string>

namespace domino {

// BadInput: the user's files or flags are wrong (exit 2). Runtime: the work failed (exit 1). PeerLost: the
// work failed because a connection to another rank broke (exit 1); when ranks fail together, the launcher
// names a rank that failed for its own reason before one that only lost its peer.
enum class ErrorKind { BadInput, Runtime, PeerLost };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }
  int exit_code() const { return kind_ == ErrorKind::BadInput ? 2 : 1; }

 private:
  ErrorKind kind_;
};

// Where in an input file something was found; rendered as "file:line:column".
struct SourceLoc {
  std::string file;
  int line = 0;    // 1-based; 0 when unknown
  int column = 0;  // 1-based; 0 when unknown
  std::string str() const;
};

[[noreturn]] void throw_bad_input(const std::string& message);
[[noreturn]] void throw_bad_input(const SourceLoc& where, const std::string& message);
[[noreturn]] void throw_runtime(const std::string& message);
[[noreturn]] void throw_peer_lost(const std::string& message);

// Runs a tool's body, prints any error as "domino-x: error: ..." on stderr and returns the exit code.
template <typename Body>
int run_main(const char* tool, Body&& body);

}  // namespace domino

#include "sim/base/error_main.inl"
