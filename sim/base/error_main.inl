// error_main.inl: run_main, the only place that turns exceptions into messages and exit codes.
#pragma once

#include <cstdio>
#include <exception>

namespace domino {

template <typename Body>
int run_main(const char* tool, Body&& body) {
  try {
    return body();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", tool, e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s\n", tool, e.what());
    return 1;
  }
}

}  // namespace domino
