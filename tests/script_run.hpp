// script_run.hpp: runs one of the project's scripts/*.py with python3, as the script tests do: its exit code
// and everything it printed (stdout and stderr together).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

namespace domino::test {

// SCRIPT is a file name under scripts/; ARGS are passed as written (the caller quotes where needed).
inline std::pair<int, std::string> run_python_script(const std::string& script, const std::string& args) {
  namespace fs = std::filesystem;
  static std::atomic<int> runs{0};
  const fs::path path = fs::path(DOMINO_TEST_DATA) / ".." / "scripts" / script;
  const fs::path log = fs::temp_directory_path() /
                       ("domino_script_" + std::to_string(getpid()) + "_" + std::to_string(runs++) + ".log");
  const int status =
      std::system(("python3 " + path.string() + " " + args + " > " + log.string() + " 2>&1").c_str());
  std::stringstream text;
  text << std::ifstream(log).rdbuf();
  fs::remove(log);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text.str()};
}

}  // namespace domino::test
