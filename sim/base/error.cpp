// error.cpp: formatting of source locations and the throw helpers.
#include "sim/base/error.hpp"

namespace domino {

std::string SourceLoc::str() const {
  std::string s = file.empty() ? std::string("<input>") : file;
  if (line > 0) {
    s.append(":").append(std::to_string(line));
    if (column > 0) s.append(":").append(std::to_string(column));
  }
  return s;
}

void throw_bad_input(const std::string& message) { throw Error(ErrorKind::BadInput, message); }

void throw_bad_input(const SourceLoc& where, const std::string& message) {
  throw Error(ErrorKind::BadInput, where.str() + ": " + message);
}

void throw_runtime(const std::string& message) { throw Error(ErrorKind::Runtime, message); }

void throw_peer_lost(const std::string& message) { throw Error(ErrorKind::PeerLost, message); }

}  // namespace domino
