// json_text.cpp: parse_json_text, the one parser of untrusted JSON text.
#include "sim/base/json_text.hpp"

namespace domino {

namespace {

using nlohmann::json;

// nlohmann's messages start with "[json.exception.parse_error.101] ": a reader's words, not the user's.
std::string without_prefix(const std::string& what) {
  const auto close = what.find("] ");
  return close == std::string::npos ? what : what.substr(close + 2);
}

}  // namespace

JsonParse parse_json_text(const std::string& text) {
  JsonParse out;
  // Past the limit every value is discarded, so nothing deep is ever built; the parse runs on to its end
  // (iteratively), and a syntax error before the deep part still wins, as it came first.
  bool too_deep = false;
  const json::parser_callback_t limit_nesting = [&too_deep](int depth, json::parse_event_t, json&) {
    if (depth > kMaxJsonNesting) too_deep = true;
    return !too_deep;
  };
  try {
    out.value = json::parse(text, limit_nesting);
  } catch (const json::parse_error& e) {
    if (!too_deep) out.failure = JsonFailure{JsonFailure::Kind::Syntax, without_prefix(e.what()), e.byte};
  } catch (const json::exception& e) {
    if (!too_deep) {
      out.failure = JsonFailure{JsonFailure::Kind::NumberOutOfRange, without_prefix(e.what()), 0};
    }
  }
  if (too_deep) {
    out.failure = JsonFailure{JsonFailure::Kind::TooDeep,
                              "JSON nested deeper than " + std::to_string(kMaxJsonNesting) + " levels", 0};
  }
  if (out.failure) out.value = nullptr;
  return out;
}

}  // namespace domino
