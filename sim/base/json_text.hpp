// json_text.hpp: parsing JSON text that comes from outside (traces, Hugging Face configs) without trusting
// it: nesting is bounded and every failure comes back as a value the reader words for its own format.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace domino {

// The inputs nest a handful of levels (a trace five, its "domino" header and a model config a few more).
// Deeper text is refused while it is parsed: copying or printing a value recurses once per level, and a
// hostile file nesting [[[[... a hundred thousand deep would exhaust the stack.
inline constexpr int kMaxJsonNesting = 64;

// Why JSON text did not parse.
struct JsonFailure {
  enum class Kind {
    Syntax,            // a syntax error
    NumberOutOfRange,  // a number beyond a double's range ("1e400"), which nlohmann reports apart
    TooDeep,           // nested deeper than kMaxJsonNesting
  };
  Kind kind = Kind::Syntax;
  // nlohmann's message without its "[json.exception.…] " prefix; TooDeep: "JSON nested deeper than N
  // levels".
  std::string message;
  size_t byte = 0;  // Syntax: nlohmann's byte count up to and including the offending character
};

// The parsed document, or why there is none (then value is null).
struct JsonParse {
  nlohmann::json value;
  std::optional<JsonFailure> failure;
};

JsonParse parse_json_text(const std::string& text);

}  // namespace domino
