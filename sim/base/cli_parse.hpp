// cli_parse.hpp: the one way every domino tool reads its command line. --help and --version print and end
// the tool with exit code 0; any other parse error is bad usage (BadInput: exit code 2) that names the tool.
#pragma once

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>
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

// A finite number above min (at least min when inclusive): "--seq-len: must be greater than 0, not nan".
// CLI11's PositiveNumber lets NaN through and names its range with DBL_MAX written out in full.
inline CLI::Validator number_at_least(double min, bool inclusive) {
  const std::string rule = (inclusive ? "at least " : "greater than ") + CLI::detail::to_string(min);
  return CLI::Validator(
      [min, inclusive, rule](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        const bool number = end != text.c_str() && *end == '\0' && std::isfinite(v);
        const bool ok = number && (inclusive ? v >= min : v > min);
        return ok ? std::string() : "must be a finite number " + rule + ", not '" + text + "'";
      },
      (inclusive ? ">= " : "> ") + CLI::detail::to_string(min));
}
inline CLI::Validator positive_number() { return number_at_least(0, false); }
inline CLI::Validator non_negative_number() { return number_at_least(0, true); }

}  // namespace domino
