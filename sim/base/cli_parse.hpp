// cli_parse.hpp: the one way every domino tool reads its command line. --help and --version print and end
// the tool with exit code 0; any other parse error is bad usage (BadInput: exit code 2) that names the tool.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "sim/base/error.hpp"

namespace domino {

// Returns the exit code when the tool should stop now (help or version printed), nothing when it goes on.
// argv is taken as const char* const* because CLI11 reads it only.
inline std::optional<int> parse_command_line(CLI::App& app, int argc, const char* const* argv, const std::string& tool) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // CallForHelp, CallForAllHelp, CallForVersion
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    throw_bad_input(std::string(e.what()) + " (see " + tool + " --help)");
  }
  return std::nullopt;
}

}  // namespace domino
